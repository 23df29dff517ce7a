"""A hostile `mcp_http` upstream for the isolation bench: its `huge` tool answers without end.

It speaks just enough MCP over HTTP for a gateway to list its one tool (`initialize`,
`tools/list`, notifications accepted), then answers every `tools/call` with `--mb` MiB of
event stream made up as it is sent (chunked, no length; issue 26's 300 MB answer). A gateway
that reads an answer whole grows by what it is sent; one that cuts it at the call's output
cap reads a little more than the cap and closes. Run in its own process
(`running_hostile_upstream`), as a real upstream would be.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
from collections.abc import Iterator
from typing import Any

from conclave.bench.core import running_child_server
from conclave.stack import free_port

TOOL = "huge"
_CHUNK = b"x" * (1 << 20)


def _answer(method: str) -> dict[str, Any]:
    if method == "initialize":
        return {
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "hostile", "version": "1"},
        }
    if method == "tools/list":
        return {"tools": [{"name": TOOL, "inputSchema": {"type": "object"}}]}
    return {}


class _Hostile:
    def __init__(self, answer_mb: int) -> None:
        self.answer_mb = answer_mb

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
                message = json.loads(await reader.readexactly(length))
                if "id" not in message:
                    writer.write(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n")
                elif message.get("method") == "tools/call":
                    await self._huge(writer)
                    return
                else:
                    reply = {
                        "jsonrpc": "2.0",
                        "id": message["id"],
                        "result": _answer(message["method"]),
                    }
                    body = json.dumps(reply).encode()
                    writer.write(
                        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                        + f"content-length: {len(body)}\r\n\r\n".encode()
                        + body
                    )
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError, StopIteration, ValueError):
            return
        finally:
            writer.close()

    async def _huge(self, writer: asyncio.StreamWriter) -> None:
        head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        writer.write(f"{head}transfer-encoding: chunked\r\n\r\n".encode())
        writer.write(b"6\r\ndata: \r\n")
        framed = f"{len(_CHUNK):x}\r\n".encode() + _CHUNK + b"\r\n"
        for _ in range(self.answer_mb):
            writer.write(framed)
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()


async def _serve(port: int, answer_mb: int) -> None:
    server = await asyncio.start_server(_Hostile(answer_mb).serve, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


@contextlib.contextmanager
def running_hostile_upstream(answer_mb: int, timeout_s: float = 30.0) -> Iterator[str]:
    """The hostile upstream in a child process on a free port; yields its MCP URL."""
    port = free_port()
    argv = [
        "conclave.bench.isolation.hostile_upstream",
        "--port",
        str(port),
        "--mb",
        str(answer_mb),
    ]
    with running_child_server(argv, port, timeout_s):
        yield f"http://127.0.0.1:{port}/mcp"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--mb", type=int, default=300, help="MiB in each tool answer")
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(args.port, args.mb))


if __name__ == "__main__":
    main()
