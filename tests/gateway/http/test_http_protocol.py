"""The coalescing transport: what one loop step writes goes out whole, and close sends it."""

from __future__ import annotations

import asyncio
import socket

import pytest

from gateway.http.connections.uvicorn_protocol import CoalescingTransport

pytestmark = pytest.mark.anyio


def _received(peer: socket.socket) -> bytes:
    try:
        return peer.recv(65536)
    except BlockingIOError:
        return b""


async def test_writes_of_one_step_are_sent_together_and_close_sends_the_rest() -> None:
    loop = asyncio.get_running_loop()
    ours, peer = socket.socketpair()
    peer.setblocking(False)
    transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, ours)
    coalescing = CoalescingTransport(transport, loop)  # type: ignore[arg-type]
    try:
        coalescing.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
        coalescing.write(b"ok")
        assert _received(peer) == b""  # gathered until the step ends
        await asyncio.sleep(0.01)
        assert _received(peer) == b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"
        coalescing.write(b"last words")
        coalescing.close()
        await asyncio.sleep(0.01)
        assert _received(peer) == b"last words"
        assert coalescing.is_closing()
    finally:
        peer.close()
