"""A minimal keep-alive HTTP/1.1 client for the gateway bench: real HTTP, little client CPU.

httpx costs ~1.8 ms of CPU per call on this machine, as much as the gateway itself; on two
shared cores the bench would measure its own client. This one writes a prepared request with
one `write` and reads the answer off one persistent connection: status line, headers, then a
`Content-Length` or chunked body. Only what the bench needs; not a general client.
"""

from __future__ import annotations

import asyncio
import contextlib
from urllib.parse import urlsplit


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
            status_line = await reader.readline()
        except ConnectionError:
            status_line = b""
        if not status_line:
            await self.aclose()
            if not reused:
                raise HttpError("the server closed the connection")
            # The server closed an idle kept-alive connection (uvicorn does after 5 s), as
            # httpx would notice too: it never read this request, so send it on a new one.
            reader, writer = await self._connect()
            writer.write(raw)
            status_line = await reader.readline()
            if not status_line:
                await self.aclose()
                raise HttpError("the server closed the connection")
        status = int(status_line.split(b" ", 2)[1])
        length = -1
        chunked = closing = False
        while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif name == b"connection":
                closing = b"close" in value.lower()
        if status in (204, 304) or 100 <= status < 200:
            body = b""  # no body, whatever the headers say (RFC 9112, 6.3)
        elif chunked:
            body = await self._read_chunked(reader)
        elif length >= 0:
            body = await reader.readexactly(length)
        else:
            body = await reader.read()
            closing = True
        if closing:
            await self.aclose()
        return status, body

    @staticmethod
    async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
        parts: list[bytes] = []
        while True:
            size = int((await reader.readline()).split(b";")[0], 16)
            if size == 0:
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(parts)
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)  # the CRLF after each chunk

    async def aclose(self) -> None:
        writer, self._reader, self._writer = self._writer, None, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
