"""The connection layer's refusals in the audit, where a stranger cannot flood it (issue 26).

`BoundedHttpToolsProtocol` refuses before any request reaches the app: a head too large or with too
many headers (431), a head not complete in time (408), a connection over its address's or the
process's cap (429). Each such refusal is an audit record in the stream of the unauthenticated
(`gateway.telemetry.audit`: tenant "", so it never pushes out a tenant's records): operation
`connection`, stage `connection`, its SERF code, and the client's address (`peer`).

A stranger makes such refusals as fast as it opens connections, so they are written under a
token bucket of the process (`PER_S`, `BURST`): past it a refusal is counted, not written, and
the next record written says how many were left out since the one before it (`dropped`).
Nothing is written before the app's audit writer runs (`attach`, from the app's lifespan).
"""

from __future__ import annotations

import time

from gateway.telemetry import AuditRecord, AuditWriter
from protocol import ErrorCode

PER_S = 10.0  # connection refusals written per second, per gateway process
BURST = 50


class ConnectionAudit:
    def __init__(self, per_s: float = PER_S, burst: int = BURST) -> None:
        self.per_s = per_s
        self.burst = burst
        self._writer: AuditWriter | None = None
        self._tokens = float(burst)
        self._at = time.monotonic()
        self._dropped = 0

    def attach(self, writer: AuditWriter | None) -> None:
        """Write to `writer` from now on (None: the app stopped; write nothing)."""
        self._writer = writer

    def refused(self, code: ErrorCode, peer: str) -> None:
        """One connection-layer refusal of a client at `peer`: audited, or counted."""
        if self._writer is None:
            return
        now = time.monotonic()
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.per_s)
        self._at = now
        if self._tokens < 1:
            self._dropped += 1
            return
        self._tokens -= 1
        dropped, self._dropped = self._dropped, 0
        self._writer.submit(
            AuditRecord(
                at_ms=int(time.time() * 1000),
                trace_id="",
                transport="http",
                operation="connection",
                outcome="refused",
                code=code.value,
                stage="connection",
                duration_ms=0.0,
                peer=peer,
                dropped=dropped,
            )
        )
