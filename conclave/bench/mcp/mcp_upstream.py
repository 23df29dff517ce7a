"""A FastMCP server that plays a remote `mcp_http` upstream, for the tests and the bench.

Run in its own process (`running_upstream()`), on a free loopback port, so the gateway in
front of it and the client measuring it do not share its event loop or CPU. It serves:

- tools: `echo`, `headers_seen` (the credential and agent headers it received),
  `traceparent_seen` (the W3C trace context it received), `meta_seen`
  (the call's `_meta`), `sleep` (answers after `ms`), `fail` (a tool error, `isError`), and
  two whose calls the wire fault layer answers badly: `http_500` and `garbage` (not JSON);
  `wait_cancel` (waits up to a minute; a cancellation of the call is recorded under its
  `tag`) and `cancellations` (the tags recorded so far);
- a resource `notes://readme` and a prompt `greet`.

Stateless by default (no MCP session, as the federation bench measures); `stateful` issues a
session, so a client's `notifications/cancelled` reaches the call it names.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Iterator
from typing import Any

import anyio
import uvicorn
from fastmcp import Context, FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.server.dependencies import get_http_headers

from conclave.bench.core import running_child_server
from conclave.stack import free_port

_FAULTS = {"http_500": (500, b"internal error"), "garbage": (200, b"{this is not json")}


class _WireFaults:
    """ASGI middleware: a `tools/call` of a fault tool is answered at the HTTP level."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        fault = _fault_of(body)
        if fault is not None:
            status, payload = fault
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": payload})
            return
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


def _fault_of(body: bytes) -> tuple[int, bytes] | None:
    try:
        message = json.loads(body)
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("method") != "tools/call":
        return None
    name = (message.get("params") or {}).get("name")
    return _FAULTS.get(name) if isinstance(name, str) else None


def build_upstream_app(stateful: bool = False) -> Any:
    """The upstream's ASGI app: FastMCP's streamable HTTP at `/mcp` behind the fault layer."""
    server = FastMCP("upstream")
    cancelled: list[str] = []

    @server.tool
    def echo(message: str) -> str:
        """Answer the message."""
        return message

    @server.tool
    def headers_seen() -> dict[str, Any]:
        """The request headers this server received that could carry a credential."""
        headers = get_http_headers(include_all=True)
        return {k: v for k, v in headers.items() if k.startswith(("authorization", "x-"))}

    @server.tool
    def traceparent_seen() -> str:
        """The W3C `traceparent` header of this call's request ("" when none came)."""
        return get_http_headers(include_all=True).get("traceparent", "")

    @server.tool
    def meta_seen(ctx: Context) -> dict[str, Any]:
        """The `_meta` of this call's request, as this server received it."""
        request = ctx.request_context
        return dict(request.meta or {}) if request is not None else {}

    @server.tool
    async def sleep(ms: int) -> str:
        """Answer after `ms` milliseconds."""
        await anyio.sleep(ms / 1000)
        return f"slept {ms} ms"

    @server.tool
    async def wait_cancel(tag: str) -> str:
        """Wait up to a minute; a cancellation of this call is recorded under `tag`."""
        try:
            await anyio.sleep(60)
        except anyio.get_cancelled_exc_class():
            cancelled.append(tag)
            raise
        return "not cancelled"

    @server.tool
    def cancellations() -> list[str]:
        """The tags of the `wait_cancel` calls cancelled so far."""
        return list(cancelled)

    @server.tool
    def fail(reason: str = "broken on purpose") -> str:
        """A tool error: the result has isError."""
        raise ToolError(reason)

    @server.tool
    def http_500() -> str:
        """Its calls are answered with HTTP 500 by the fault layer."""
        return "unreachable"

    @server.tool
    def garbage() -> str:
        """Its calls are answered with a body that is not JSON by the fault layer."""
        return "unreachable"

    @server.resource("notes://readme", mime_type="text/plain")
    def readme() -> str:
        """The upstream's readme."""
        return "upstream notes"

    @server.prompt
    def greet(name: str) -> str:
        """A greeting for `name`."""
        return f"Say hello to {name}."

    app = server.http_app(path="/mcp", json_response=True, stateless_http=not stateful)
    app.add_middleware(_WireFaults)
    return app


@contextlib.contextmanager
def running_upstream(
    timeout_s: float = 30.0, port: int | None = None, *, stateful: bool = False
) -> Iterator[str]:
    """The upstream in a child process (on `port`, or a free one); yields its MCP URL, stops
    it on exit."""
    port = port or free_port()
    flags = ["--stateful"] if stateful else []
    argv = ["conclave.bench.mcp.mcp_upstream", "--port", str(port), *flags]
    with running_child_server(argv, port, timeout_s):
        yield f"http://127.0.0.1:{port}/mcp"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--stateful", action="store_true", help="issue MCP sessions")
    args = parser.parse_args()
    app = build_upstream_app(stateful=args.stateful)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
