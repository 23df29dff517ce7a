"""The bounds on HTTP connections, checked before a request reaches the app (issue 26).

Before this, a stranger could hold the gateway without ever authenticating: idle and
half-sent connections stayed open for ever, a 64 MB header was parsed (10 s of CPU), and
20,000 idle connections took every descriptor. `ConnectionLimits` holds the bounds (from
`Settings`); `ConnectionTable` counts one process's open connections, in total and per
client address, and knows which are idle (waiting for a request head, none in flight), oldest
first: at the total cap a new connection closes the oldest idle one, so a flood of idle or
half-open connections goes before any connection with a request in flight does. Each gateway
process (`--workers`) keeps its own table: the caps are per process.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from gateway.config import Settings

# Descriptors kept for what is not a client connection: Redis, sandboxes, the egress proxy.
_DESCRIPTORS_KEPT = 512


class Closable(Protocol):
    def close_idle(self) -> None:
        """Close this connection: it holds no request in flight."""


@dataclass(frozen=True)
class ConnectionLimits:
    """What one connection may hold and how many a process serves at once."""

    max_head_bytes: int = 65_536  # request line and headers of one request
    max_headers: int = 100
    head_timeout_s: float = 5.0  # from ready-for-a-request to the head's end
    idle_timeout_s: float = 5.0  # keep-alive: from an answer to the next request's first byte
    max_connections: int = 4096
    max_connections_per_address: int = 1024

    @classmethod
    def from_settings(cls, settings: Settings) -> ConnectionLimits:
        """The configured bounds, the total cut to what the descriptor limit allows."""
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        total = settings.http_max_connections
        if soft != resource.RLIM_INFINITY:
            total = max(1, min(total, soft - _DESCRIPTORS_KEPT))
        return cls(
            max_head_bytes=settings.http_max_head_bytes,
            max_headers=settings.http_max_headers,
            head_timeout_s=settings.http_head_timeout_s,
            idle_timeout_s=settings.http_idle_timeout_s,
            max_connections=total,
            max_connections_per_address=settings.http_max_connections_per_address,
        )


class ConnectionTable:
    """One process's open connections: counts per address and the idle ones, oldest first."""

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self._open = 0
        self._per_address: dict[str, int] = {}
        self._idle: dict[Closable, None] = {}  # insertion order: the oldest idle first

    def admit(self, connection: Closable, address: str) -> str | None:
        """Count a new connection; None, or why it is refused (it is then not counted).
        At the total cap the oldest idle connection is closed to make room."""
        if self._per_address.get(address, 0) >= self.limits.max_connections_per_address:
            return (
                f"this address holds {self.limits.max_connections_per_address} connections,"
                " the most the gateway serves one address: reuse them (keep-alive)"
            )
        if self._open >= self.limits.max_connections:
            if not self._idle:
                return (
                    f"the gateway serves {self.limits.max_connections} connections, each with"
                    " a request in flight: retry shortly"
                )
            oldest = next(iter(self._idle))
            self.forget_idle(oldest)
            oldest.close_idle()
        self._open += 1
        self._per_address[address] = self._per_address.get(address, 0) + 1
        self._idle[connection] = None
        return None

    def release(self, connection: Closable, address: str) -> None:
        """The connection closed (once per admitted connection)."""
        self._idle.pop(connection, None)
        self._open -= 1
        left = self._per_address.get(address, 0) - 1
        if left > 0:
            self._per_address[address] = left
        else:
            self._per_address.pop(address, None)

    def mark_idle(self, connection: Closable) -> None:
        self._idle[connection] = None

    def forget_idle(self, connection: Closable) -> None:
        self._idle.pop(connection, None)
