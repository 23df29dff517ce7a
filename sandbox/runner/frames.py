"""Frames between the runner and the host, and what crosses during a call.

The host's socket carries `runner_wire` frames (4-byte big-endian length, then UTF-8 JSON)
both ways: `send_frame`, `recv_frame`. While a call runs, the host may send only a cancel
(or, for an `mcp_stdio` call, its answers to the server's requests): `HostWatch` reads them.
What the runner sends before a call's reply (the call's events, its server's requests to the
client and notices) goes through `HostEvents`, bounded by `runner_wire.MAX_EVENTS`. A call's
child reports its events on a pipe of their own, framed the same way (`event_writer` writes
them, `EventRelay` reads and forwards them).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from typing import Any

from . import runner_wire as wire

MAX_FRAME = 64 * 1024 * 1024  # what the host may send (it is trusted); replies are capped
HEADER = wire.HEADER


def send_frame(sock: socket.socket, message: dict[str, Any]) -> None:
    data = json.dumps(message, separators=(",", ":")).encode()
    sock.sendall(HEADER.pack(len(data)) + data)


def recv_frame(sock: socket.socket) -> dict[str, Any] | None:
    header = _recv_exactly(sock, HEADER.size)
    if header is None:
        return None
    (size,) = HEADER.unpack(header)
    if size > MAX_FRAME:
        raise ValueError(f"frame of {size} bytes exceeds {MAX_FRAME}")
    body = _recv_exactly(sock, size)
    return None if body is None else dict(json.loads(body))


def _recv_exactly(sock: socket.socket, size: int) -> bytes | None:
    chunks, got = [], 0
    while got < size:
        chunk = sock.recv(size - got)
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


def read_some(fd: int) -> bytes:
    try:
        return os.read(fd, 1 << 16)
    except BlockingIOError:
        return b""


def event_writer(fd: int) -> Any:
    """What the tool's context reports to: each event framed on the call's events pipe (an
    event longer than the wire allows is not sent)."""

    def report(event: Any) -> None:
        data = json.dumps(event.model_dump(mode="json"), separators=(",", ":")).encode()
        if len(data) <= wire.EVENT_LIMIT:
            write_all(fd, HEADER.pack(len(data)) + data)

    return report


_DRAIN_CHUNKS = 16  # 1 MiB of events read per look at the pipe


class EventRelay:
    """The call's events pipe: its frames forwarded to the host as they come. Tool code can
    write there itself: a frame over `EVENT_LIMIT` or not JSON ends the relay for the call
    (what follows is read and dropped, so the tool never blocks on a full pipe)."""

    def __init__(self, fd: int, forward: Any) -> None:
        self.fd = fd
        self._forward = forward
        self._buffer = bytearray()
        self._broken = False
        os.set_blocking(fd, False)

    def drain(self) -> None:
        """Read what the pipe holds now (at most `_DRAIN_CHUNKS` reads, so a tool writing
        without end cannot keep the runner from its deadline) and forward its events."""
        for _ in range(_DRAIN_CHUNKS):
            if not (chunk := read_some(self.fd)):
                return
            if self._broken:
                continue
            self._buffer += chunk
            while len(self._buffer) >= HEADER.size:
                (size,) = HEADER.unpack_from(self._buffer)
                if size > wire.EVENT_LIMIT:
                    self._broken = True
                    self._buffer.clear()
                    break
                if len(self._buffer) < HEADER.size + size:
                    break
                body = bytes(self._buffer[HEADER.size : HEADER.size + size])
                del self._buffer[: HEADER.size + size]
                try:
                    event = json.loads(body)
                except ValueError:
                    self._broken = True
                    self._buffer.clear()
                    break
                if isinstance(event, dict):
                    self._forward(event)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


class CallCancelled(Exception):
    """The host cancelled the call (or went away) while it ran."""


class HostWatch:
    """The host's socket while call `call_id` runs: what it sends then is a cancel or nothing
    (it sends the next call only after this one's answer)."""

    def __init__(self, host: socket.socket, call_id: Any) -> None:
        self.host = host
        self.fd = host.fileno()
        self.call_id = call_id

    def cancels(self) -> bool:
        """Read the frame the host sent: True when it cancels this call, or the host is gone."""
        return self.cancelled_by(self.read())

    def read(self) -> dict[str, Any] | None:
        """The frame the host sent; None when the host is gone."""
        try:
            return recv_frame(self.host)
        except (OSError, ValueError):
            return None

    def cancelled_by(self, frame: dict[str, Any] | None) -> bool:
        if frame is None:  # the host went away: nobody waits for the call
            return True
        return frame.get("type") == wire.CANCEL and frame.get("id") == self.call_id


class HostEvents:
    """What goes to the host while call `call_id` runs, before its reply: the call's events
    and its server's requests to the client, at most `wire.MAX_EVENTS` of them together."""

    def __init__(self, host: socket.socket | None, call_id: Any) -> None:
        self.host = host
        self.call_id = call_id
        self.sent = 0

    def forward(self, event: dict[str, Any], field: str = wire.EVENT_FIELD) -> None:
        self._send(event, wire.EVENT_LIMIT, {"type": wire.EVENT, field: event})

    def notice(self, source: str, message: dict[str, Any]) -> None:
        """Send the host a server's notice (`wire.NOTICE_METHODS`)."""
        frame = {"type": wire.NOTICE, wire.SOURCE_FIELD: source}
        self._send(message, wire.EVENT_LIMIT, {**frame, wire.NOTIFICATION_FIELD: message})

    def ask(self, number: int, message: dict[str, Any]) -> bool:
        """Send the host a server's request to the client; False when it was not sent."""
        frame = {"type": wire.SERVER_REQUEST, wire.REQUEST_FIELD: number}
        return self._send(message, wire.REQUEST_LIMIT, {**frame, wire.MESSAGE_FIELD: message})

    def _send(self, payload: Any, limit: int, frame: dict[str, Any]) -> bool:
        if self.host is None or self.sent >= wire.MAX_EVENTS:
            return False
        try:
            size = len(json.dumps(payload, separators=(",", ":")))
        except (TypeError, ValueError):
            return False
        if size > limit:
            return False
        self.sent += 1
        send_frame(self.host, {**frame, "id": self.call_id})
        return True
