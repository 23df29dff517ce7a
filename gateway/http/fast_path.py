"""The hot routes, ahead of the app's middleware stack: a tool call goes straight to its handler.

Seven middleware layers, the router's matching and FastAPI's per-request telemetry check cost
~17% of a tool call's CPU in the gateway (py-spy under load, issue 4), and ~25% of a state
commit's, and do nothing for these routes: their handlers read the body under the size limit
and answer every refusal themselves. Anything else takes the full stack as before; an
exception a hot handler lets out gets the answer the app's handler for `Exception` gives (a
SERF envelope).

`FastPath` is built from the app's own route table, not written beside it: for a request, the
first route (in the router's order) that takes its method and whose path regex (Starlette's,
compiled from the route's path) matches decides, as in the router; if that route is marked
`@hot_route` (`gateway.http.hot_routes`) its handler answers, else the full stack does. A
method's routes after its last hot one are left out: they would take the full stack anyway.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi.routing import RouteContext, iter_route_contexts
from starlette.convertors import Convertor, PathConvertor, StringConvertor
from starlette.requests import Request
from starlette.routing import BaseRoute, WebSocketRoute
from starlette.types import Receive, Scope, Send

from gateway.gateway_error import translate
from gateway.http.hot_routes import Handler, hot_handler_of
from gateway.http.responses import refusal

# Convertors whose `convert` gives the matched text back: not called per request.
_AS_MATCHED = (StringConvertor, PathConvertor)


@dataclass(frozen=True, slots=True)
class _Route:
    """A route as the router matches it: Starlette's path regex, and its handler if hot."""

    path_regex: re.Pattern[str] | None  # None: matched by something else (a Host): any path
    prefix: str  # the path's text before its first parameter: a cheap test before the regex
    convert: tuple[tuple[str, Callable[[str], Any]], ...]  # path params not taken as matched
    handler: Handler | None  # None: not hot, the full stack serves it

    @classmethod
    def of(cls, route: RouteContext) -> _Route:
        path_regex: re.Pattern[str] | None = getattr(route, "path_regex", None)
        convertors: dict[str, Convertor[Any]] = getattr(route, "param_convertors", {})
        convert = tuple(
            (name, c.convert) for name, c in convertors.items() if type(c) not in _AS_MATCHED
        )
        prefix = (route.path_format or "").partition("{")[0] if path_regex is not None else ""
        return cls(path_regex, prefix, convert, hot_handler_of(route))


class FastPath:
    """The hot handler for a request, found the way the app's router would find its route."""

    def __init__(self, routes: Sequence[BaseRoute]) -> None:
        # Every route an HTTP request can match; a websocket route never does.
        http = [
            (_Route.of(route), route.methods)
            for route in iter_route_contexts(routes)
            if not isinstance(route.original_route, WebSocketRoute)
        ]
        # A route without methods takes every method: it is in every method's list. A method
        # no route names takes the stack, which is always a right answer.
        named = {method for _, methods in http for method in methods or ()}
        self._by_method: dict[str, tuple[_Route, ...]] = {}
        for method in named:
            in_order = [route for route, methods in http if not methods or method in methods]
            hot = [i for i, route in enumerate(in_order) if route.handler is not None]
            if hot:  # after a method's last hot route, the full stack serves it either way
                self._by_method[method] = tuple(in_order[: hot[-1] + 1])

    def handler(self, scope: Scope) -> Handler | None:
        """The handler for a hot route (path params put in `scope`), or None: take the stack."""
        if scope["type"] != "http" or scope.get("root_path"):
            return None
        path: str = scope["path"]
        for route in self._by_method.get(scope["method"], ()):
            found = None
            if route.path_regex is not None:
                found = route.path_regex.match(path) if path.startswith(route.prefix) else None
                if found is None:
                    continue
            if route.handler is not None:  # the router's first match is hot
                params: dict[str, Any] = found.groupdict() if found is not None else {}
                for name, convert in route.convert:
                    params[name] = convert(params[name])
                scope["path_params"] = params
            return route.handler
        return None


async def serve_hot(handler: Handler, scope: Scope, receive: Receive, send: Send) -> None:
    try:
        response = await handler(Request(scope, receive, send))
    except Exception as exc:
        response = refusal(translate(exc, None))
    await response(scope, receive, send)


__all__ = ["FastPath", "serve_hot"]
