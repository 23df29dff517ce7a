"""The hot routes, ahead of the app's middleware stack: a tool call goes straight to its handler.

Seven middleware layers, the router's matching and FastAPI's per-request telemetry check cost
~17% of a tool call's CPU in the gateway (py-spy under load, issue 4), and ~25% of a state
commit's, and do nothing for these routes: their handlers read the body under the size limit
and answer every refusal themselves. Anything else takes the full stack as before; an
exception a hot handler lets out gets the answer the app's handler for `Exception` gives (a
SERF envelope).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from gateway.gateway_error import translate
from gateway.http.mcp.endpoint import mcp_post
from gateway.http.responses import refusal
from gateway.http.routes import state_routes as state
from gateway.http.routes.tool_routes import call_tool

Handler = Callable[[Request], Awaitable[Response]]


def _with_path_params(endpoint: Callable[..., Awaitable[Response]]) -> Handler:
    """A FastAPI endpoint taking its path parameters by name, called as a `Handler`."""

    async def handler(request: Request) -> Response:
        return await endpoint(request=request, **request.path_params)

    return handler


# (method, path pattern, handler): the patterns are what Starlette makes of the routes'
# "{name}" ([^/]+) and "{key:path}" (.*), tried in the routers' order.
_HOT: tuple[tuple[str, re.Pattern[str], Handler], ...] = tuple(
    (method, re.compile(pattern), handler)
    for method, pattern, handler in (
        ("POST", r"^/v1/tools/(?P<name>[^/]+)/call$", call_tool),
        ("POST", r"^/v1/state/(?P<namespace>[^/]+)/commit$", _with_path_params(state.post_commit)),
        ("POST", r"^/v1/state/(?P<namespace>[^/]+)/leases$", _with_path_params(state.post_leases)),
        (
            "DELETE",
            r"^/v1/state/(?P<namespace>[^/]+)/leases/(?P<key>.*)$",
            _with_path_params(state.delete_lease),
        ),
        # GET .../history takes query parameters: FastAPI's route validates them.
        (
            "GET",
            r"^/v1/state/(?P<namespace>[^/]+)/(?!history$)(?P<key>.*)$",
            _with_path_params(state.get_key),
        ),
    )
)


def hot_handler(scope: Scope) -> Handler | None:
    """The handler for a hot route (path params put in `scope`), or None: take the stack."""
    if scope["type"] != "http" or scope.get("root_path"):
        return None
    method: str = scope["method"]
    path: str = scope["path"]
    if method == "POST" and path == "/mcp":
        return mcp_post
    for route_method, pattern, handler in _HOT:
        if route_method == method and (found := pattern.match(path)) is not None:
            scope["path_params"] = found.groupdict()
            return handler
    return None


async def serve_hot(handler: Handler, scope: Scope, receive: Receive, send: Send) -> None:
    try:
        response = await handler(Request(scope, receive, send))
    except Exception as exc:
        response = refusal(translate(exc, None))
    await response(scope, receive, send)
