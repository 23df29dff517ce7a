"""What the budgets learn from each finished tool call, in one Redis round trip.

After every call the account stage (`CallFeedback.learn`) adds the call's duration to the
tool's latency window and tells the tool's circuit breaker whether the call was evidence of
a healthy tool:

- a call killed at its limit (`TOOL_TIMEOUT`) is recorded *censored* at that limit: it would
  have taken at least that; and how late the kill answered past the sandbox's deadline
  (`KILL_OVERSHOOT`), which the allocator keeps back from later grants so a killed call
  still answers before the run's deadline;
- a failure decided before the tool did any work (no such tool, no sandbox) says nothing
  about its latency or health, and is not recorded;
- only a fault of the tool's own counts against its breaker (`counts_against_tool`).

Done as two requests, the sample and the evidence would be two round trips on every call (a
good part of the gateway's Redis work per call); `OutcomeRecorder` runs one Lua script that
does both, with the same effect as `LatencyWindow.record` followed by `CircuitBreaker.record`.
The window's and the breaker's keys share the tool's hash tag, so the script touches a single
cluster slot.
"""

from __future__ import annotations

import time

from gateway.budgets.breaker import (
    BreakerStateName,
    CircuitBreaker,
    breaker_key,
    counts_against_tool,
)
from gateway.budgets.latency_window import (
    KILL_OVERSHOOT,
    LatencySample,
    LatencyWindow,
    sample_member,
    window_key,
)
from gateway.lua_files import lua_text
from protocol import ErrorCode, SerfError
from sandbox import NOT_RUN

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


class CallFeedback:
    def __init__(self, window: LatencyWindow, breaker: CircuitBreaker) -> None:
        self.window = window
        self.recorder = OutcomeRecorder(window, breaker)

    async def learn(
        self,
        tool: str,
        error: SerfError | None,
        *,
        wall_ms: float,
        granted_ms: int,
        declared_ms: int,
        stop_by_ms: int | None,
        answered_ms: float,
    ) -> None:
        """Record one finished call: its outcome (`error`, None for a result), the wall time
        it took, the time it was granted, and when it answered against the sandbox's
        deadline (`stop_by_ms`)."""
        timed_out = error is not None and error.code is ErrorCode.TOOL_TIMEOUT
        duration: float | None = None
        if error is None or error.code not in NOT_RUN:
            duration = granted_ms if timed_out else wall_ms
        if timed_out:
            assert error is not None
            # How late the kill answered. A kill in the sandbox is measured from the call's
            # own start there: a cold sandbox start before it is not lateness of the kill.
            # A call the gateway cut (its usage counts from before the sandbox was ready)
            # and a call the executor cut at the sandbox's deadline are late past that.
            late = answered_ms - stop_by_ms if stop_by_ms is not None else 0.0
            cut_by_gateway = error.details.get("killed_by") == "gateway"
            overrun = 0.0 if cut_by_gateway else wall_ms - granted_ms
            await self.window.record(KILL_OVERSHOOT, max(0.0, overrun, late))
        if error is None:
            await self.recorder.record(tool, duration_ms=duration, healthy=True)
            return
        fault = counts_against_tool(error.code, granted_ms=granted_ms, declared_ms=declared_ms)
        await self.recorder.record(
            tool, duration_ms=duration, censored=timed_out, healthy=False if fault else None
        )
