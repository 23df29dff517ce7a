"""A small MCP server over stdio that misbehaves on request, for the `mcp_stdio` fault tests.

Standard library only, so any sandbox's python3 runs it by path (isolating sandboxes mount
`tools` at /opt/conclave/code/tools): `stdio_mcp_server.py [--start MODE]`. At start, MODE
`exit` exits at once (saying why on stderr), `hang` never answers `initialize`, `duplicate`
lists a tool twice; otherwise it serves these tools: `echo` (its text back), `pid` (its
process id), `sleep` (`seconds`), `crash` (exits in the middle of the call), `garbage`
(writes a line that is not JSON), `flood` (one answer line of `bytes` bytes), `report`
(sends `notifications/progress` for the call's `progressToken`, when it has one, and a
`notifications/message` at each of the levels `debug`, `info` and `warning`, then answers),
`sample` (asks the client's model, `sampling/createMessage`, and answers what it said, or
that it was refused; a call cancelled meanwhile is recorded as `wait_cancel`'s and not
answered), `wait_cancel` (waits up to a minute for a `notifications/cancelled` naming the
call, which it records and does not answer, as MCP asks) and `cancellations` (the request
ids it saw cancelled); and two that answer rich content: `picture` (an image block with
annotations, and the server's `_meta`) and `forecast` (structured content, listed with a
title, annotations, icons, an `outputSchema` and `_meta`). With `--resources` it also serves
resources that may be subscribed to (`watch://<name>`, read as the times it was touched) and
the tool `touch` (`uri`, `after`): it counts the resource touched and tells a subscribed
client `notifications/resources/updated`, before its answer, or `after` seconds after it
(when the gateway's call is over: the sandbox is idle). It is not a tool module: nothing
here registers with the gateway.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import sys
import time
from collections.abc import Iterator
from typing import Any

_TOOLS = (
    "echo", "pid", "sleep", "crash", "garbage", "flood", "wait_cancel", "cancellations", "report",
    "picture", "forecast", "sample",
)  # fmt: skip
_CANCELLED: list[Any] = []  # the request ids of the `wait_cancel` calls cancelled
_WATCHED = "watch://counter"
_TOUCHED: dict[str, int] = {}  # resource URI -> times touched
_SUBSCRIBED: set[str] = set()


class _Lines:
    """stdin's lines, read without a buffer hiding them from `select` (`wait_cancel` reads
    what comes while it waits)."""

    def __init__(self) -> None:
        self._buffer = b""
        self.closed = False

    def next(self, timeout_s: float | None = None) -> bytes | None:
        """The next line; None at end of input or when `timeout_s` passed first."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            if self.closed:
                return None
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([0], [], [], left)[0]:
                return None
            chunk = os.read(0, 1 << 16)
            if not chunk:
                self.closed = True
                continue
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def __iter__(self) -> Iterator[bytes]:
        while (line := self.next()) is not None:
            yield line


_STDIN = _Lines()


def _wait_cancel(ident: Any) -> bool:
    """Wait up to a minute for `notifications/cancelled` of request `ident`: True if it came."""
    deadline = time.monotonic() + 60
    while (left := deadline - time.monotonic()) > 0:
        line = _STDIN.next(left)
        if line is None:
            return False
        message = json.loads(line)
        params = message.get("params") or {}
        if message.get("method") == "notifications/cancelled" and params.get("requestId") == ident:
            _CANCELLED.append(ident)
            return True
    return False


PIXEL = (  # a one-pixel PNG
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4"
    "DwABBAEAcCBlCwAAAABJRU5ErkJggg=="
)
PICTURE = {
    "content": [
        {"type": "image", "data": PIXEL, "mimeType": "image/png", "annotations": {"priority": 1}}
    ],
    "_meta": {"example.com/frame": 1},
}
FORECAST_LISTED = {
    "title": "Weather forecast",
    "outputSchema": {
        "type": "object",
        "properties": {"celsius": {"type": "number"}},
        "required": ["celsius"],
    },
    "annotations": {"readOnlyHint": True, "openWorldHint": True},
    "icons": [{"src": "https://example.com/sun.png", "mimeType": "image/png"}],
    "_meta": {"example.com/owner": "weather-team"},
}


def _tool(name: str) -> dict[str, Any]:
    listed = {
        "name": name,
        "description": f"misbehaving: {name}",
        "inputSchema": {"type": "object"},
    }
    return {**listed, **FORECAST_LISTED} if name == "forecast" else listed


def _write(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _report(token: Any) -> None:
    """What `report` sends before its answer: progress (only for a token), then logs."""
    if token is not None:
        for step in (1, 2):
            params = {"progressToken": token, "progress": step, "total": 2, "message": f"{step}/2"}
            _write({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})
    for level in ("debug", "info", "warning"):
        params = {"level": level, "logger": "stdio", "data": f"stdio says {level}"}
        _write({"jsonrpc": "2.0", "method": "notifications/message", "params": params})


def _sample(ident: Any) -> dict[str, Any] | None:
    """Ask the client to sample; its answer as the call's result, None when cancelled."""
    params = {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}]}
    _write({"jsonrpc": "2.0", "id": "sample-1", "method": "sampling/createMessage", **{
        "params": {**params, "maxTokens": 10}}})  # fmt: skip
    while (line := _STDIN.next(60)) is not None:
        message = json.loads(line)
        params = message.get("params") or {}
        if message.get("method") == "notifications/cancelled" and params.get("requestId") == ident:
            _CANCELLED.append(ident)
            return None
        if message.get("id") == "sample-1" and "method" not in message:
            said = (message.get("result") or {}).get("content", {}).get("text")
            refused = (message.get("error") or {}).get("message")
            text = f"refused: {refused}" if said is None else f"said: {said}"
            return {"content": [{"type": "text", "text": text}]}
    return {"content": [{"type": "text", "text": "no answer"}]}


def _updated(uri: str) -> None:
    if uri in _SUBSCRIBED:
        params = {"uri": uri}
        _write({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": params})


def _resources(method: str, params: dict[str, Any]) -> Any:
    """`resources/*` of `--resources`: what it answers."""
    uri = str(params.get("uri", ""))
    if method == "resources/list":
        return {"resources": [{"uri": _WATCHED, "name": "counter", "mimeType": "text/plain"}]}
    if method == "resources/templates/list":
        return {"resourceTemplates": []}
    if method == "resources/read":
        text = str(_TOUCHED.get(uri, 0))
        return {"contents": [{"uri": uri, "mimeType": "text/plain", "text": text}]}
    if method == "resources/subscribe":
        _SUBSCRIBED.add(uri)
    else:
        _SUBSCRIBED.discard(uri)
    return {}


def _call(name: str, arguments: dict[str, Any]) -> Any:
    if name == "touch":
        uri = str(arguments.get("uri", _WATCHED))
        _TOUCHED[uri] = _TOUCHED.get(uri, 0) + 1
        if not float(arguments.get("after", 0)):
            _updated(uri)
        return str(_TOUCHED[uri])
    if name == "subscriptions":
        return json.dumps(sorted(_SUBSCRIBED))
    if name == "report":
        return "reported"
    if name == "cancellations":
        return json.dumps(_CANCELLED)
    if name == "echo":
        return str(arguments.get("text", ""))
    if name == "pid":
        return str(os.getpid())
    if name == "sleep":
        time.sleep(float(arguments.get("seconds", 60)))
        return "slept"
    if name == "crash":
        os._exit(7)
    if name == "garbage":
        sys.stdout.write("this is not JSON-RPC\n")
        sys.stdout.flush()
        time.sleep(60)
    if name == "picture":
        return PICTURE
    if name == "forecast":
        return {
            "content": [{"type": "text", "text": '{"celsius": 21.5}'}],
            "structuredContent": {"celsius": 21.5},
        }
    if name == "flood":
        sys.stdout.write("x" * int(arguments.get("bytes", 1 << 24)))
        sys.stdout.flush()
        time.sleep(60)
    raise KeyError(name)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--start", default="ok", choices=("ok", "exit", "hang", "duplicate"))
    parser.add_argument("--resources", action="store_true", help="serve watch:// resources")
    options = parser.parse_args()
    start, resources = options.start, options.resources
    served = _TOOLS + (("touch", "subscriptions") if resources else ())
    if start == "exit":
        print("misbehaving server: exiting at start, as asked", file=sys.stderr)
        return 3
    for line in _STDIN:
        if not line.strip():
            continue
        message = json.loads(line)
        method, ident = message.get("method"), message.get("id")
        if ident is None:
            continue  # a notification
        if method == "initialize":
            if start == "hang":
                time.sleep(3600)
            info = {"name": "misbehaving", "version": "1"}
            capabilities: dict[str, Any] = {"tools": {}}
            if resources:
                capabilities["resources"] = {"subscribe": True}
            result: Any = {"protocolVersion": "2025-06-18", "capabilities": capabilities}
            _write({"jsonrpc": "2.0", "id": ident, "result": {**result, "serverInfo": info}})
        elif method == "tools/list":
            tools = [_tool(n) for n in served] + ([_tool("echo")] if start == "duplicate" else [])
            _write({"jsonrpc": "2.0", "id": ident, "result": {"tools": tools}})
        elif method == "tools/call":
            params = message.get("params") or {}
            if params.get("name") == "sample":
                if (sampled := _sample(ident)) is not None:
                    _write({"jsonrpc": "2.0", "id": ident, "result": sampled})
                continue
            if params.get("name") == "wait_cancel":
                if not _wait_cancel(ident):
                    _write({"jsonrpc": "2.0", "id": ident, "result": {"content": []}})
                continue  # a cancelled request is not answered
            if params.get("name") == "report":
                _report((params.get("_meta") or {}).get("progressToken"))
            answer = _call(str(params.get("name")), params.get("arguments") or {})
            if isinstance(answer, str):
                answer = {"content": [{"type": "text", "text": answer}]}
            _write({"jsonrpc": "2.0", "id": ident, "result": answer})
            after = float((params.get("arguments") or {}).get("after", 0) or 0)
            if params.get("name") == "touch" and after:
                time.sleep(after)  # the gateway's call is over: its sandbox is idle
                _updated(str((params.get("arguments") or {}).get("uri", _WATCHED)))
        elif resources and str(method).startswith("resources/"):
            result = _resources(str(method), message.get("params") or {})
            _write({"jsonrpc": "2.0", "id": ident, "result": result})
        else:
            error = {"code": -32601, "message": f"no method {method}"}
            _write({"jsonrpc": "2.0", "id": ident, "error": error})
    return 0


if __name__ == "__main__":
    sys.exit(main())
