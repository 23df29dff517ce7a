"""One Redis round trip per tool call's outcome: its latency sample and the breaker's evidence.

After every call the gateway adds the call's duration to the tool's latency window and tells
the tool's circuit breaker whether the call was evidence of a healthy tool. Done as two
requests they are two round trips on every call (a good part of the gateway's Redis work
per call); here one Lua script does both, with the same effect as `LatencyWindow.record`
followed by `CircuitBreaker.record`. The window's and the breaker's keys share the tool's
hash tag, so the script touches a single cluster slot.
"""

from __future__ import annotations

import time

from gateway.budgets.breaker import BreakerStateName, CircuitBreaker, breaker_key
from gateway.budgets.latency_window import (
    LatencySample,
    LatencyWindow,
    sample_member,
    window_key,
)
from gateway.lua_files import lua_text

# The shared functions first, then the body that runs both: each function is written once.
_RECORD_BOTH = lua_text("gateway.budgets", "record_sample", "record_outcome", "outcome")


class OutcomeRecorder:
    def __init__(self, window: LatencyWindow, breaker: CircuitBreaker) -> None:
        self.window = window
        self.breaker = breaker
        self._record = window.redis.register_script(_RECORD_BOTH)

    async def record(
        self,
        tool: str,
        *,
        duration_ms: float | None,
        censored: bool = False,
        healthy: bool | None,
        now_ms: int | None = None,
    ) -> BreakerStateName | None:
        """Add a sample (unless `duration_ms` is None) and the breaker's evidence (unless
        `healthy` is None); returns the breaker's state when there was evidence."""
        if duration_ms is None and healthy is None:
            return None
        now = now_ms if now_ms is not None else int(time.time() * 1000)
        member = (
            ""
            if duration_ms is None
            else sample_member(LatencySample(max(0.0, duration_ms), censored))
        )
        evidence = "" if healthy is None else ("1" if healthy else "0")
        state = await self._record(
            keys=[window_key(tool), breaker_key(tool)],
            args=[
                now,
                member,
                self.window.window_ms,
                self.window.max_samples,
                evidence,
                self.breaker.threshold,
                self.breaker.cooldown_ms,
            ],
        )
        if healthy is None:
            return None
        return "closed" if state == "closed" else "open"
