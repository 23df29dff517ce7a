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
`@hot` (`gateway.http.hot_routes`) its handler answers, else the full stack does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from fastapi.routing import RouteContext, iter_route_contexts
from starlette.convertors import Convertor, PathConvertor, StringConvertor
from starlette.requests import Request
from starlette.routing import BaseRoute, WebSocketRoute
from starlette.types import Receive, Scope, Send

from gateway.gateway_error import translate
from gateway.http.hot_routes import Handler, hot_handler_of
from gateway.http.responses import refusal

# Starlette writes each path parameter as a named group; one pattern per method holds many
# routes, so each route's groups are renamed apart.
_PARAM_GROUP = re.compile(r"\(\?P<(\w+)>")
# Convertors whose `convert` gives the matched text back: not called per request.
_AS_MATCHED = (StringConvertor, PathConvertor)


@dataclass(frozen=True, slots=True)
class _Route:
    """A route as the router matches it: Starlette's path regex, and its handler if hot."""

    path_regex: re.Pattern[str] | None  # None: matched by something else (a Host): any path
    convertors: dict[str, Convertor[Any]]
    fixed_path: str | None  # its one path, when it has no parameters
    handler: Handler | None  # None: not hot, the full stack serves it

    @classmethod
    def of(cls, route: RouteContext) -> _Route:
        path_regex: re.Pattern[str] | None = getattr(route, "path_regex", None)
        convertors: dict[str, Convertor[Any]] = getattr(route, "param_convertors", {})
        fixed = route.path_format if path_regex is not None and not convertors else None
        return cls(path_regex, convertors, fixed, hot_handler_of(route))

    def may_match(self, path: str) -> bool:
        return self.path_regex is None or self.path_regex.match(path) is not None


class _Hit(NamedTuple):
    """What a match on one route's alternative decides."""

    handler: Handler | None
    params: tuple[tuple[str, int], ...]  # (name, its group's number in the method's pattern)
    converted: tuple[tuple[str, Callable[[str], Any]], ...]  # those not taken as matched


class _MethodTable(NamedTuple):
    """One method's routes, in the router's order, as one pattern of alternatives: Python's
    `re` tries alternatives left to right, so the first route that matches is the one found.
    (Tuples: unpacked once per request, cheaper than attribute reads.)"""

    exact: dict[str, Handler]  # hot routes without parameters that are first for their path
    match: Callable[[str], re.Match[str] | None]
    hits: dict[int | None, _Hit]  # by the number of the group wrapping each alternative


class FastPath:
    """The hot handler for a request, found the way the app's router would find its route."""

    def __init__(self, routes: Sequence[BaseRoute]) -> None:
        # Every route an HTTP request can match; a websocket route never does.
        http = [
            (_Route.of(route), route.methods)
            for route in iter_route_contexts(routes)
            if not isinstance(route.original_route, WebSocketRoute)
        ]
        # A route without methods takes every method: it is in every method's table. A method
        # no route names takes the stack, which is always a right answer.
        named = {method for _, methods in http for method in methods or ()}
        self._by_method = {
            method: _table([r for r, methods in http if not methods or method in methods])
            for method in named
        }

    def handler(self, scope: Scope) -> Handler | None:
        """The handler for a hot route (path params put in `scope`), or None: take the stack."""
        if scope["type"] != "http" or scope.get("root_path"):
            return None
        table = self._by_method.get(scope["method"])
        if table is None:
            return None
        exact, match, hits = table
        path: str = scope["path"]
        handler = exact.get(path)
        if handler is not None:
            return handler
        found = match(path)
        if found is None:
            return None
        # The wrapping group closes last, so it is the match's `lastindex`.
        handler, params_of, converted = hits[found.lastindex]
        if handler is not None:
            params: dict[str, Any] = {}  # a loop: a comprehension costs a call per request
            for name, group in params_of:
                params[name] = found[group]
            if converted:  # rare: most parameters are taken as matched
                for name, convert in converted:
                    params[name] = convert(params[name])
            scope["path_params"] = params
        return handler


def _table(routes: list[_Route]) -> _MethodTable | None:
    """The table of one method's routes, or None when none of them is hot."""
    hot = [index for index, route in enumerate(routes) if route.handler is not None]
    if not hot:
        return None
    routes = routes[: hot[-1] + 1]  # after the last hot route, the full stack either way
    exact: dict[str, Handler] = {}
    for index, route in enumerate(routes):
        path = route.fixed_path
        if (
            path is not None
            and route.handler is not None
            and not any(earlier.may_match(path) for earlier in routes[:index])
        ):
            exact[path] = route.handler  # the router's first match for that path
    kept = [
        (f"r{index}", route)
        for index, route in enumerate(routes)
        if not _settled_without_pattern(route, routes[index + 1 :], exact)
    ]
    pattern = re.compile(
        "|".join(f"(?P<{group}>{_renamed(route, group)})" for group, route in kept)
    )
    number = pattern.groupindex
    hits: dict[int | None, _Hit] = {
        number[group]: _Hit(
            route.handler,
            tuple((name, number[f"{group}_{name}"]) for name in route.convertors),
            tuple(
                (name, c.convert)
                for name, c in route.convertors.items()
                if type(c) not in _AS_MATCHED
            ),
        )
        for group, route in kept
    }
    return _MethodTable(exact, pattern.match, hits)


def _renamed(route: _Route, group: str) -> str:
    """The route's path pattern, its parameters' groups renamed apart from other routes'."""
    if route.path_regex is None:  # matched by something else: any path
        return ""
    return _PARAM_GROUP.sub(rf"(?P<{group}_\1>", route.path_regex.pattern)


def _settled_without_pattern(route: _Route, later: list[_Route], exact: dict[str, Handler]) -> bool:
    """True when a request on `route`'s path gets the same answer with `route` left out of the
    pattern: it has one path, which `exact` answers or which is not hot, and no hot route
    after it takes that path (nor "path\\n": `$` matches before a final newline)."""
    path = route.fixed_path
    if path is None or route.handler not in (None, exact.get(path)):
        return False
    return not any(
        other.handler is not None and (other.may_match(path) or other.may_match(path + "\n"))
        for other in later
    )


async def serve_hot(handler: Handler, scope: Scope, receive: Receive, send: Send) -> None:
    try:
        response = await handler(Request(scope, receive, send))
    except Exception as exc:
        response = refusal(translate(exc, None))
    await response(scope, receive, send)


__all__ = ["FastPath", "serve_hot"]
