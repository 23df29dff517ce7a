"""A minimal keep-alive HTTP/1.1 client for the gateway bench: real HTTP, little client CPU.

httpx costs ~1.8 ms of CPU per call on this machine, as much as the gateway itself; on two
shared cores the bench would measure its own client. This one writes a prepared request with
one `write` and reads the answer off one persistent connection: status line, headers, then a
`Content-Length` or chunked body (read as the gateway reads its MCP upstreams' answers,
`gateway.sources.read_answer`). Only what the bench needs; not a general client.
"""

from __future__ import annotations

import asyncio
import contextlib
from urllib.parse import urlsplit

from gateway.sources import UpstreamClosed, read_answer


class HttpError(RuntimeError):
    pass


def encode_request(
    method: str, base_url: str, path: str, headers: dict[str, str], body: bytes = b""
) -> bytes:
    """A complete HTTP/1.1 request (head and body) as `Http1Connection.request` sends it."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: {urlsplit(base_url).netloc}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    if body or method in ("POST", "PUT", "PATCH"):
        lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


class Http1Connection:
    """One persistent connection to `base_url`; calls on it are sequential."""

    def __init__(self, base_url: str) -> None:
        parts = urlsplit(base_url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self._reader is None or self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        return self._reader, self._writer

    async def request(self, raw: bytes) -> tuple[int, bytes]:
        """Send a complete request (head and body) and read its answer."""
        reused = self._writer is not None
        reader, writer = await self._connect()
        try:
            writer.write(raw)
            answer, keep_alive = await read_answer(reader)
        except (UpstreamClosed, ConnectionResetError, BrokenPipeError):
            await self.aclose()
            if not reused:
                raise HttpError("the server closed the connection") from None
            # The server closed an idle kept-alive connection (uvicorn does after 5 s), as
            # httpx would notice too: it never read this request, so send it on a new one.
            reader, writer = await self._connect()
            writer.write(raw)
            try:
                answer, keep_alive = await read_answer(reader)
            except (UpstreamClosed, ConnectionResetError, BrokenPipeError):
                await self.aclose()
                raise HttpError("the server closed the connection") from None
        if not keep_alive:
            await self.aclose()
        return answer.status, answer.body

    async def aclose(self) -> None:
        writer, self._reader, self._writer = self._writer, None, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
