"""A reverse proxy that adds a bearer token, for clients that cannot send one.

The official conformance suite connects to a URL and sends no header of its own; Conclave's
`/mcp` wants a token. This proxy forwards every request to the gateway unchanged (method,
path, query, body, and the client's own `Host` and `Origin`, so the gateway's DNS-rebinding
check still sees what the client sent) with `Authorization: Bearer <token>` set, and streams
the answer back as it comes (SSE included). A client that goes away closes the request to the
gateway too.

`rename_prefix` (optional) stands in for a gateway option that is not there yet: serving one
source's tools and prompts under their own names. With it, a call of `test_simple_text` goes
to the gateway as `<prefix>test_simple_text` (`tools/call`, `prompts/get`, a `completion/
complete` of a prompt), and the prefix comes off the names in `tools/list` and `prompts/list`
answers; a 2026-07-28 request's `Mcp-Name` header naming the same tool is renamed with its
body; nothing else is touched.

Run: `python -m conclave.bench.mcp.token_proxy --port P --target URL --token-file F
[--rename-prefix fx.]`.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

import anyio
import httpx
import uvicorn

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

# Per connection, never forwarded (RFC 9110 7.6.1); content-length is recomputed when a body
# is rewritten, and httpx sets its own for the request.
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "authorization",
    }
)
_RENAMED_CALLS = ("tools/call", "prompts/get")
_RENAMED_LISTS = {"tools/list": "tools", "prompts/list": "prompts"}


class TokenProxy:
    """The ASGI app: every request to `target` (a base URL, no path) with the token added."""

    def __init__(self, target: str, token: str, rename_prefix: str = "") -> None:
        self.target = target.rstrip("/")
        self.authorization = f"Bearer {token}"
        self.prefix = rename_prefix
        self.client = httpx.AsyncClient(timeout=httpx.Timeout(None), follow_redirects=False)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send, self.client)
            return
        if scope["type"] != "http":
            return
        body = await _read_body(receive)
        original = body
        body, listing = self._renamed_request(body)
        headers = [
            (name.decode("latin-1"), value.decode("latin-1"))
            for name, value in scope["headers"]
            if name.decode("latin-1").lower() not in _HOP_BY_HOP
        ]
        if body is not original:
            headers = [self._renamed_header(name, value) for name, value in headers]
        headers.append(("authorization", self.authorization))
        query = scope.get("query_string", b"").decode("latin-1")
        url = self.target + scope["path"] + (f"?{query}" if query else "")
        request = self.client.build_request(scope["method"], url, headers=headers, content=body)
        async with anyio.create_task_group() as group:

            async def forward() -> None:
                await self._forward(request, listing, send)
                group.cancel_scope.cancel()

            group.start_soon(forward)
            # A client that disconnects cancels the forwarding, which closes the upstream
            # request: the gateway sees its client go away.
            while (await receive())["type"] != "http.disconnect":
                pass
            group.cancel_scope.cancel()

    async def _forward(self, request: httpx.Request, listing: str | None, send: Send) -> None:
        answer = await self.client.send(request, stream=True)
        try:
            headers = [
                (name.encode("latin-1"), value.encode("latin-1"))
                for name, value in answer.headers.multi_items()
                if name.lower() not in _HOP_BY_HOP
            ]
            if listing is not None:  # small, and rewritten whole
                content = self._renamed_listing(await answer.aread(), listing)
                headers.append((b"content-length", str(len(content)).encode()))
                await send({"type": "http.response.start", "status": answer.status_code,
                            "headers": headers})  # fmt: skip
                await send({"type": "http.response.body", "body": content})
                return
            await send({"type": "http.response.start", "status": answer.status_code,
                        "headers": headers})  # fmt: skip
            async for chunk in answer.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        finally:
            await answer.aclose()

    def _renamed_request(self, body: bytes) -> tuple[bytes, str | None]:
        """The body to forward, and which list's names to rename in the answer (if any)."""
        if not self.prefix or not body:
            return body, None
        try:
            message = json.loads(body)
        except ValueError:
            return body, None
        if not isinstance(message, dict) or not isinstance(message.get("params", {}), dict):
            return body, None
        method, params = message.get("method"), message.get("params") or {}
        if method in _RENAMED_LISTS:
            return body, _RENAMED_LISTS[method]
        target = params
        if method == "completion/complete" and isinstance(params.get("ref"), dict):
            target = params["ref"] if params["ref"].get("type") == "ref/prompt" else {}
        elif method not in _RENAMED_CALLS:
            return body, None
        if isinstance(target.get("name"), str):
            target["name"] = self.prefix + target["name"]
            return json.dumps(message).encode(), None
        return body, None

    def _renamed_header(self, name: str, value: str) -> tuple[str, str]:
        """`Mcp-Name` follows its body's renamed tool or prompt name (the gateway checks that
        they agree); one that named another still disagrees after, and is refused."""
        if name.lower() != "mcp-name" or value.strip().startswith(self.prefix):
            return name, value
        return name, self.prefix + value.strip()

    def _renamed_listing(self, content: bytes, key: str) -> bytes:
        """A list answer (JSON, or SSE events) with the prefix off the names it carries."""
        stripped = content.lstrip()
        if stripped.startswith(b"{"):
            return self._renamed_message(content, key)
        lines = content.split(b"\n")
        for index, line in enumerate(lines):
            if line.startswith(b"data:"):
                lines[index] = b"data: " + self._renamed_message(line[5:].strip(), key)
        return b"\n".join(lines)

    def _renamed_message(self, data: bytes, key: str) -> bytes:
        try:
            message = json.loads(data)
        except ValueError:
            return data
        entries = (message.get("result") or {}).get(key) if isinstance(message, dict) else None
        if not isinstance(entries, list):
            return data
        for entry in entries:
            name = entry.get("name") if isinstance(entry, dict) else None
            if isinstance(name, str) and name.startswith(self.prefix):
                entry["name"] = name.removeprefix(self.prefix)
        return json.dumps(message).encode()


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def _lifespan(receive: Receive, send: Send, client: httpx.AsyncClient) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await client.aclose()
            await send({"type": "lifespan.shutdown.complete"})
            return


def main() -> None:
    parser = argparse.ArgumentParser(description="Adds a bearer token to every request")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--target", required=True, help="the gateway's base URL")
    parser.add_argument("--token-file", type=Path, required=True)
    parser.add_argument("--rename-prefix", default="")
    options = parser.parse_args()
    token = options.token_file.read_text("utf-8").strip()
    app = TokenProxy(options.target, token, options.rename_prefix)
    uvicorn.run(app, host="127.0.0.1", port=options.port, log_level="warning", lifespan="on")


if __name__ == "__main__":
    main()
