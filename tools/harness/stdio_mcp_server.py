"""A small MCP server over stdio that misbehaves on request, for the `mcp_stdio` fault tests.

Standard library only, so any sandbox's python3 runs it by path (isolating sandboxes mount
`tools` at /opt/conclave/code/tools): `stdio_mcp_server.py [--start MODE]`. At start, MODE
`exit` exits at once (saying why on stderr), `hang` never answers `initialize`, `duplicate`
lists a tool twice; otherwise it serves these tools: `echo` (its text back), `pid` (its
process id), `sleep` (`seconds`), `crash` (exits in the middle of the call), `garbage`
(writes a line that is not JSON) and `flood` (one answer line of `bytes` bytes); and two
that answer rich content: `picture` (an image block with annotations, and the server's
`_meta`) and `forecast` (structured content, listed with a title, annotations, icons, an
`outputSchema` and `_meta`). It is not a tool module: nothing here registers with the gateway.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

_TOOLS = ("echo", "pid", "sleep", "crash", "garbage", "flood", "picture", "forecast")
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


def _call(name: str, arguments: dict[str, Any]) -> Any:
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
    start = parser.parse_args().start
    if start == "exit":
        print("misbehaving server: exiting at start, as asked", file=sys.stderr)
        return 3
    for line in sys.stdin:
        message = json.loads(line)
        method, ident = message.get("method"), message.get("id")
        if ident is None:
            continue  # a notification
        if method == "initialize":
            if start == "hang":
                time.sleep(3600)
            info = {"name": "misbehaving", "version": "1"}
            result: Any = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}}
            _write({"jsonrpc": "2.0", "id": ident, "result": {**result, "serverInfo": info}})
        elif method == "tools/list":
            tools = [_tool(n) for n in _TOOLS] + ([_tool("echo")] if start == "duplicate" else [])
            _write({"jsonrpc": "2.0", "id": ident, "result": {"tools": tools}})
        elif method == "tools/call":
            params = message.get("params") or {}
            answer = _call(str(params.get("name")), params.get("arguments") or {})
            if isinstance(answer, str):
                answer = {"content": [{"type": "text", "text": answer}]}
            _write({"jsonrpc": "2.0", "id": ident, "result": answer})
        else:
            error = {"code": -32601, "message": f"no method {method}"}
            _write({"jsonrpc": "2.0", "id": ident, "error": error})
    return 0


if __name__ == "__main__":
    sys.exit(main())
