"""uvicorn's HTTP protocol with every connection bounded before the app sees a request.

httptools has no cap of its own on a request head: it gathers a header's pieces until the
header ends, so a 64 MB header cost 10 s of gateway CPU (issue 26). This protocol counts the
bytes of each request head as they arrive and parses no more than `max_head_bytes` of it,
counts headers, and closes a connection whose head is not complete `head_timeout_s` after
it started: a new connection's from the connection's start (one that never sends, or sends a
byte at a time, holds nothing for long), a kept-alive one's from the head's first byte. The
wait before that byte is `idle_timeout_s` (uvicorn's own timer), longer than common clients'
keep-alive expiry (httpx's and the `mcp` client's 5 s): closing a kept-alive connection as
the client reused it reset the request in flight. New connections are admitted by the
process's `ConnectionTable` (per address and in total, idle ones evicted first). Every
refusal is a SERF envelope with `Connection: close`, written before the app is reached:
- a head past its bytes or its header count: 431, PAYLOAD_TOO_LARGE, naming the limit;
- a connection over its address's cap, or over the total with none idle: 429, RATE_LIMITED;
- a head begun but not finished in time: 408, INVALID_REQUEST (a silent connection is just
  closed; so is an idle keep-alive after `idle_timeout_s`, uvicorn's own timer).
Each of these refusals is audited through the table's `ConnectionAudit` (the stream of the
unauthenticated, rate limited: `gateway.http.connections.connection_audit`).

A refused head is answered with a lingering close: closing a connection with bytes of the
client's still unread makes the kernel reset it, and a client still sending (a 600 KB plan
header) then loses the answer to the reset. So the answer is followed by the end of the
gateway's side, and what the client still sends is read and dropped, `LINGER_BYTES` or
`LINGER_S` at most, before the close.
"""

from __future__ import annotations

import asyncio
import http
from asyncio import TimerHandle
from typing import Any, ClassVar

from gateway.http.connections.connection_audit import ConnectionAudit
from gateway.http.connections.connection_limits import ConnectionLimits, ConnectionTable
from gateway.http.connections.uvicorn_protocol import CoalescingHttpToolsProtocol
from protocol import ErrorCode, SerfError

LINGER_BYTES = 1 << 20
LINGER_S = 2.0


class _HeadRefused(Exception):
    """Stops the parser inside a callback; `send_400_response` then writes the refusal."""


def raw_refusal(status: int, error: SerfError) -> bytes:
    """A whole HTTP/1.1 answer carrying `error`, closing the connection."""
    body = error.model_dump_json(exclude_none=True).encode()
    head = [
        f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}",
        "content-type: application/json",
        f"content-length: {len(body)}",
        "connection: close",
    ]
    if error.retry_after_ms is not None:
        head.append(f"retry-after: {max(1, -(-error.retry_after_ms // 1000))}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


class BoundedHttpToolsProtocol(CoalescingHttpToolsProtocol):
    table: ClassVar[ConnectionTable] = ConnectionTable(ConnectionLimits())

    audit: ClassVar[ConnectionAudit] = ConnectionAudit()

    @classmethod
    def bound_to(
        cls, limits: ConnectionLimits, audit: ConnectionAudit | None = None
    ) -> type[BoundedHttpToolsProtocol]:
        """This protocol with its own table under `limits`, its refusals audited by `audit`:
        what uvicorn's `http=` takes."""
        fields = {"table": ConnectionTable(limits), "audit": audit or ConnectionAudit()}
        return type(cls.__name__, (cls,), fields)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limits = self.table.limits
        self.timeout_keep_alive = self.limits.idle_timeout_s  # type: ignore[assignment]
        self._address = ""
        self._admitted = False
        self._in_head = True  # the bytes arriving now belong to a request head
        self._head_bytes = 0
        self._head_since: float | None = None  # loop time the head's clock started (None: idle)
        self._head_timer: TimerHandle | None = None
        self._refusal: bytes | None = None
        self._linger_left: int | None = None  # bytes still dropped before the close
        self._linger_timer: TimerHandle | None = None

    # Connections: admitted by the table, released once.
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._address = self.client[0] if self.client else ""
        refused = self.table.admit(self, self._address)
        if refused is not None:
            error = SerfError.of(ErrorCode.RATE_LIMITED, refused, retry_after_ms=1000)
            self.transport.write(raw_refusal(429, error))
            self.transport.close()
            self.audit.refused(error.code, self._address)
            return
        self._admitted = True
        self._start_head_clock()  # a new connection's first head: timed from now
        self.table.mark_idle(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        if self._linger_timer is not None:
            self._linger_timer.cancel()
        if self._admitted:
            self._admitted = False
            self.table.release(self, self._address)
        super().connection_lost(exc)

    def close_idle(self) -> None:
        self._cancel_head_timer()
        self.transport.close()

    # The head: bytes, headers, time.
    def data_received(self, data: bytes) -> None:
        if self._linger_left is not None:  # refused: dropped until the close
            self._linger_left -= len(data)
            if self._linger_left <= 0:
                self.transport.close()
            return
        if not self._in_head:
            super().data_received(data)
            return
        if self._head_since is None:  # a kept-alive connection's next head begins
            self._start_head_clock()
        room = self.limits.max_head_bytes - self._head_bytes
        if len(data) <= room:
            self._head_bytes += len(data)
            super().data_received(data)
            return
        # Parse only what fits; if the head ends inside it, the rest is its body (and on).
        self._head_bytes += room
        if room > 0:
            super().data_received(data[:room])
        if self.transport.is_closing():
            return
        if self._in_head:
            self._refuse_head(f"at most {self.limits.max_head_bytes} bytes")
            return
        self.data_received(data[room:])

    def on_headers_complete(self) -> None:
        # Counted once the head is in: its bytes cap already bounds what parsing it cost,
        # and no per-header hook is added to the hot path.
        if len(self.headers) > self.limits.max_headers:
            self._refusal = self._head_refusal(f"at most {self.limits.max_headers} headers")
            raise _HeadRefused
        self._in_head = False
        self._head_since = None
        self.table.forget_idle(self)
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._in_head, self._head_bytes = True, 0  # what follows is the next request's head
        super().on_message_complete()

    def on_response_complete(self) -> None:
        pipelined = bool(self.pipeline)  # a head already in: its request starts now
        super().on_response_complete()
        if not pipelined and not self.transport.is_closing():
            self.table.mark_idle(self)  # the idle timeout runs; the head's clock at its byte

    def send_400_response(self, msg: str) -> None:
        if self._refusal is None:
            super().send_400_response(msg)
            return
        self._answer_and_linger(self._refusal)
        self.audit.refused(ErrorCode.PAYLOAD_TOO_LARGE, self._address)

    def _refuse_head(self, limit: str) -> None:
        self._answer_and_linger(self._head_refusal(limit))
        self.audit.refused(ErrorCode.PAYLOAD_TOO_LARGE, self._address)

    def _answer_and_linger(self, answer: bytes) -> None:
        """Write `answer`, end the gateway's side, and drop what the client still sends for
        a while before closing (the module's lingering close)."""
        self._cancel_head_timer()
        self.transport.write(answer)
        if not self.transport.can_write_eof():
            self.transport.close()
            return
        self.transport.write_eof()
        self._linger_left = LINGER_BYTES
        self._linger_timer = self.loop.call_later(LINGER_S, self.transport.close)

    def _head_refusal(self, limit: str) -> bytes:
        error = SerfError.of(
            ErrorCode.PAYLOAD_TOO_LARGE,
            f"the request head is larger than the gateway takes ({limit}): send less in headers",
            param_hints={"headers": limit},
        )
        return raw_refusal(431, error)

    def _start_head_clock(self) -> None:
        """The head must be complete within the head timeout from now. The timer is armed
        once and re-armed lazily when it fires, not once per request."""
        self._head_since = self.loop.time()
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.limits.head_timeout_s, self._check_head)

    def _check_head(self) -> None:
        self._head_timer = None
        if self._head_since is None or self.transport.is_closing():
            return  # in flight or idle: the next head's first byte arms the timer again
        left_s = self._head_since + self.limits.head_timeout_s - self.loop.time()
        if left_s > 0:
            self._head_timer = self.loop.call_later(left_s, self._check_head)
            return
        if self._head_bytes:  # a head begun: say why; a silent connection is just closed
            error = SerfError.of(
                ErrorCode.INVALID_REQUEST,
                f"the request head did not arrive within {self.limits.head_timeout_s:g} s:"
                " send it whole",
            )
            self.transport.write(raw_refusal(408, error))
            self.audit.refused(error.code, self._address)
        self.transport.close()

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
