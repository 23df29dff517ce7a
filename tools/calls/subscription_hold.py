"""`SubscriptionHold`: a call that subscribes an MCP server in the caller's sandbox asks the
pool to keep that sandbox for `hold_s` after it, and to hand what its servers notify to
`heard` (the sandbox's `idle_watch` reads them while it sits idle)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# What a sandbox's servers notified: (the server's source, the notification as it came).
Heard = Callable[[str, dict[str, Any]], None]


@dataclass(frozen=True)
class SubscriptionHold:
    """Keep the sandbox a call ran in for `hold_s` after it, and its notices go to `heard`.
    `heard` must not block: it is called while the runner's channel is read."""

    hold_s: float
    heard: Heard
