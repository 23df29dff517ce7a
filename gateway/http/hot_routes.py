"""Which routes are hot: declared once, with `@hot_route`, where the route is declared.

`@hot_route(router, path, *methods)` registers a plain Starlette endpoint (`Request ->
Response`) on the router and marks it hot; `gateway.http.fast_path` finds the marked routes
in the app's own route table, so a route declared beside a hot one (a sub-route before a hot
catch-all, say) is seen exactly where the router sees it. A hot endpoint reads and checks
its own input (path parameters from `request.path_params`, the body under the size limit):
the fast path skips FastAPI's dependency solving, so there is nothing for it to solve.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from starlette.requests import Request
from starlette.responses import Response

Handler = Callable[[Request], Awaitable[Response]]
H = TypeVar("H", bound=Handler)

_MARK = "__conclave_hot__"


class _Routes(Protocol):
    def add_route(self, path: str, endpoint: Any, methods: list[str] | None = None) -> None: ...


def hot_route(router: _Routes, path: str, *methods: str) -> Callable[[H], H]:
    """Declare `path` on `router` for `methods`, served ahead of the middleware stack."""

    def declare(endpoint: H) -> H:
        setattr(endpoint, _MARK, True)
        router.add_route(path, endpoint, methods=list(methods))  # add_route: no prefix
        return endpoint

    return declare


def hot_handler_of(route: Any) -> Handler | None:
    """The handler the fast path calls for `route`, or None: it is not hot."""
    endpoint = getattr(route, "endpoint", None)
    if endpoint is None or not getattr(endpoint, _MARK, False):
        return None
    handler: Handler = endpoint
    return handler


__all__ = ["Handler", "hot_handler_of", "hot_route"]
