"""uvicorn's HTTP protocol, with each answer written to the socket in one piece.

uvicorn writes a response's head and its body with two `transport.write` calls, so a small JSON
answer costs two `send` system calls and, with TCP_NODELAY, two packets. On the 2-core VM we
benchmark on, socket writes were ~19% of the gateway's CPU under load (py-spy, issue 3/4).
`CoalescingTransport` gathers what one event-loop step writes and sends it at once, as the
step ends (`call_soon`); anything but `write` goes straight to the real transport, and `close`
and `write_eof` send what is gathered first.

A connection lost before its request was answered calls the hook the request's handler left
in its scope (`gateway.cancellation.CLIENT_GONE_HOOK`: the running call's cancel), so a tool
call stops when its client goes away without a task per call watching for it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from gateway.cancellation import CLIENT_GONE_HOOK


class CoalescingTransport:
    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._pending:
            self._loop.call_soon(self._flush)
        self._pending.append(bytes(data))

    def _flush(self) -> None:
        if not self._pending:
            return
        data = b"".join(self._pending)
        self._pending.clear()
        if not self._transport.is_closing():
            self._transport.write(data)

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def write_eof(self) -> None:
        self._flush()
        self._transport.write_eof()

    def __getattr__(self, name: str) -> Any:  # everything else: the real transport's
        return getattr(self._transport, name)


class CoalescingHttpToolsProtocol(HttpToolsProtocol):
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        coalescing = CoalescingTransport(transport, self.loop)
        super().connection_made(coalescing)  # type: ignore[arg-type]

    def on_message_begin(self) -> None:
        super().on_message_begin()
        scope: dict[str, Any] = self.scope  # type: ignore[assignment]
        scope[CLIENT_GONE_HOOK] = None  # the hook's slot: this server calls it

    def connection_lost(self, exc: Exception | None) -> None:
        cycle = self.cycle
        unanswered = cycle is not None and not cycle.response_complete
        hook = cycle.scope.get(CLIENT_GONE_HOOK) if cycle is not None and unanswered else None
        super().connection_lost(exc)
        if callable(hook):
            hook()
