"""Which routes are hot: declared once, with `@hot_route`, where the route is declared.

`@hot_route(router, path, *methods)` registers a plain Starlette endpoint (`Request ->
Response`) on the router and marks it hot; `gateway.http.fast_path` finds the marked routes
in the app's own route table, so a route declared beside a hot one (a sub-route before a hot
catch-all, say) is seen exactly where the router sees it. A hot endpoint reads and checks
its own input (path parameters from `request.path_params`, the body under the size limit):
the fast path skips FastAPI's dependency solving, so there is nothing for it to solve.
What it declares for the OpenAPI document (`HotDoc`) is read by `gateway.http.openapi_document`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response

from protocol import SerfError

Handler = Callable[[Request], Awaitable[Response]]
H = TypeVar("H", bound=Handler)

_MARK = "__conclave_hot__"
_DOC = "__conclave_hot_doc__"


@dataclass(frozen=True)
class HotDoc:
    """What the OpenAPI document says of a hot route (FastAPI documents only its own)."""

    body: type[BaseModel] | None
    answer: type[BaseModel] | None
    status: int
    refusal: type[BaseModel]  # the body of a 4xx/5xx answer


class _Routes(Protocol):
    def add_route(self, path: str, endpoint: Any, methods: list[str] | None = None) -> None: ...


def hot_route(
    router: _Routes,
    path: str,
    *methods: str,
    body: type[BaseModel] | None = None,
    answer: type[BaseModel] | None = None,
    status: int = 200,
    refusal: type[BaseModel] = SerfError,
) -> Callable[[H], H]:
    """Declare `path` on `router` for `methods`, served ahead of the middleware stack; `body`,
    `answer`, `status` and `refusal` are what the OpenAPI document shows for it."""

    def declare(endpoint: H) -> H:
        setattr(endpoint, _MARK, True)
        setattr(endpoint, _DOC, HotDoc(body, answer, status, refusal))
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


def hot_doc_of(route: Any) -> HotDoc | None:
    """What `@hot_route` declared of `route` for the OpenAPI document, or None: not hot."""
    doc: HotDoc | None = getattr(getattr(route, "endpoint", None), _DOC, None)
    return doc


__all__ = ["Handler", "HotDoc", "hot_doc_of", "hot_handler_of", "hot_route"]
