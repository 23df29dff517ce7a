"""Which routes are hot, and how a hot route's endpoint is called without the stack.

A route is declared once, in its router, like any other; `@hot` on its endpoint is all that
makes it hot. `gateway.http.fast_path` finds the marked routes in the app's own route table,
so a route declared beside a hot one (a sub-route before a hot catch-all, say) is seen
exactly where the router sees it.

The fast path skips FastAPI's dependency solving, so a hot endpoint reads and validates its
own input: a plain Starlette endpoint (`Request -> Response`) is called as it is; a FastAPI
endpoint may take the request and `str` path parameters by name, and nothing FastAPI would
have to solve (a query, header, cookie or body parameter, a dependency). Anything else is
refused when the fast path is built, with the route named.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from fastapi.routing import APIRoute, RouteContext
from starlette.requests import Request
from starlette.responses import Response

Handler = Callable[[Request], Awaitable[Response]]
Endpoint = TypeVar("Endpoint", bound=Callable[..., Awaitable[Response]])

_MARK = "__conclave_hot__"


def hot(endpoint: Endpoint) -> Endpoint:
    """Mark a route's endpoint hot: the gateway serves it ahead of its middleware stack."""
    setattr(endpoint, _MARK, True)
    return endpoint


def hot_handler_of(route: RouteContext) -> Handler | None:
    """The handler the fast path calls for `route`, or None: it is not hot."""
    endpoint: Any = route.endpoint
    if not getattr(endpoint, _MARK, False):
        return None
    if isinstance(route.original_route, APIRoute):
        return _by_name(route, endpoint)
    handler: Handler = endpoint
    return handler


def _by_name(route: RouteContext, endpoint: Callable[..., Awaitable[Response]]) -> Handler:
    """A FastAPI endpoint taking the request and its path parameters by name, as a `Handler`."""
    dependant = route.dependant
    solved = [
        field.name
        for field in (
            *dependant.query_params,
            *dependant.header_params,
            *dependant.cookie_params,
            *dependant.body_params,
        )
    ]
    solved += [f"{d.call!r}" for d in dependant.dependencies]
    # FastAPI would validate a typed or constrained path parameter; the fast path passes it raw,
    # by the name the path gives it.
    solved += [
        field.name
        for field in dependant.path_params
        if field.field_info.annotation is not str or field.field_info.metadata
    ]
    taken = {field.name for field in dependant.path_params}
    solved += sorted(taken.symmetric_difference(route.param_convertors))
    request_name = dependant.request_param_name
    if request_name is None or solved:
        differs = solved if request_name is not None else [*solved, "request"]
        methods = ",".join(sorted(route.methods or ()))
        raise TypeError(
            f"hot route {methods} {route.path}: {endpoint.__name__} must take the request and"
            f" the path's parameters (str) by name, nothing FastAPI solves; it differs in:"
            f" {', '.join(differs)}. Read those from the request in the endpoint, or drop @hot"
        )

    async def handler(request: Request) -> Response:
        return await endpoint(**{request_name: request}, **request.path_params)

    return handler


__all__ = ["Endpoint", "Handler", "hot", "hot_handler_of"]
