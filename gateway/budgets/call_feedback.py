"""What the budgets learn from each finished tool call, recorded by the account stage.

After a call the tool's latency window gets its duration and its circuit breaker the
evidence, in one Redis round trip (`OutcomeRecorder`):

- a call killed at its limit (`TOOL_TIMEOUT`) is recorded *censored* at that limit: it would
  have taken at least that; and how late the kill answered past the sandbox's deadline
  (`KILL_OVERSHOOT`), which the allocator keeps back from later grants so a killed call
  still answers before the run's deadline;
- a failure decided before the tool did any work (refused arguments, no such tool, no
  sandbox) says nothing about its latency or health, and is not recorded;
- only a fault of the tool's own counts against its breaker (`counts_against_tool`).
"""

from __future__ import annotations

from gateway.budgets.breaker import CircuitBreaker, counts_against_tool
from gateway.budgets.latency_window import KILL_OVERSHOOT, LatencyWindow
from gateway.budgets.outcome import OutcomeRecorder
from protocol import ErrorCode, SerfError
from sandbox import NOT_RUN


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
