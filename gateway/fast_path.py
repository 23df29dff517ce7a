"""The hot routes, ahead of the app's middleware stack: a tool call goes straight to its handler.

Seven middleware layers, the router's matching and FastAPI's per-request telemetry check cost
~17% of a tool call's CPU in the gateway (py-spy under load, issue 4) and do nothing for these
two routes: their handlers read the body under the size limit and answer every refusal
themselves. Anything else takes the full stack as before; an exception a hot handler lets out
gets the answer the app's handler for `Exception` gives (a SERF envelope).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from gateway.errors import translate
from gateway.mcp.endpoint import mcp_post
from gateway.routes.tools import call_tool, refusal

Handler = Callable[[Request], Awaitable[Response]]

_TOOL_CALL = re.compile(r"^/v1/tools/([^/]+)/call$")  # what Starlette's "{name}" matches


def hot_handler(scope: Scope) -> Handler | None:
    """The handler for a hot route (path params put in `scope`), or None: take the stack."""
    if scope["type"] != "http" or scope["method"] != "POST" or scope.get("root_path"):
        return None
    path: str = scope["path"]
    if path == "/mcp":
        return mcp_post
    found = _TOOL_CALL.match(path)
    if found is None:
        return None
    scope["path_params"] = {"name": found.group(1)}
    return call_tool


async def serve_hot(handler: Handler, scope: Scope, receive: Receive, send: Send) -> None:
    try:
        response = await handler(Request(scope, receive, send))
    except Exception as exc:
        response = refusal(translate(exc, None))
    await response(scope, receive, send)
