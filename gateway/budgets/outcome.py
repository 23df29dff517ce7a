"""What the budgets learn from each finished tool call, in one Redis round trip.

After every call the account stage (`CallFeedback.learn`) adds the call's duration to the
caller's tenant's latency window of the tool and tells the tenant's circuit breaker of the
tool whether the call was evidence of a healthy tool:

- a call killed at its limit (`TOOL_TIMEOUT`) is recorded *censored* at that limit: it would
  have taken at least that; and how late the kill answered past the sandbox's deadline
  (`kill_overshoot_of(tool)`), which the allocator keeps back from the tenant's later grants
  so a killed call still answers before the run's deadline;
- a call its caller cancelled (`CANCELLED`) is recorded *censored* at the time it ran: it
  would have taken at least that; it is no evidence for or against the tool's health;
- a failure decided before the tool did any work (no such tool, no sandbox) says nothing
  about its latency or health, and is not recorded;
- only a fault of the tool's own counts against its breaker (`counts_against_tool`);
- the caller's identity earns its share of a hedge (`hedge_budget`), when hedging is on.

Everything is keyed by (tenant, tool): what one tenant's calls do (or forge) never moves
another tenant's grants, margins or breakers. The durations come from the executor, which
clamps them to what the host observed (`sandbox.instance.runner_reply`).

The same round trip gives back the call's place among its tenant's calls in flight
(`admission.InFlight`). Done as separate requests, the place, the sample, the overshoot and
the evidence would be up to four round trips on every call; `OutcomeRecorder` runs one Lua
script that does all of them, with the same effect as `Admission.release`,
`LatencyWindow.record` and `CircuitBreaker.record`. Its keys share the tenant's hash tag, so
the script touches a single cluster slot.
"""

from __future__ import annotations

import time

from gateway.budgets.admission import InFlight, in_flight_key
from gateway.budgets.breaker import (
    BreakerStateName,
    CircuitBreaker,
    breaker_key,
    counts_against_tool,
)
from gateway.budgets.hedge_budget import HedgeBudget, HedgeDeposit
from gateway.budgets.latency_window import (
    LatencySample,
    LatencyWindow,
    kill_overshoot_of,
    sample_member,
    version_key,
    window_key,
)
from gateway.redis_io import PooledScript, lua_script
from protocol import ErrorCode, SerfError
from tools.calls import NOT_RUN

# The shared functions first, then the body that runs both: each function is written once.
_RECORD_BOTH = lua_script(
    "gateway.budgets", "record_sample", "record_outcome", "hedge_deposit", "outcome"
)


class OutcomeRecorder:
    def __init__(self, window: LatencyWindow, breaker: CircuitBreaker) -> None:
        self.window = window
        self.breaker = breaker
        self._record = PooledScript(window.redis, _RECORD_BOTH.text, name="outcome")

    async def record(
        self,
        tenant: str,
        tool: str,
        *,
        duration_ms: float | None,
        censored: bool = False,
        healthy: bool | None,
        kill_overshoot_ms: float | None = None,
        hedge: HedgeDeposit | None = None,
        in_flight: InFlight | None = None,
        now_ms: int | None = None,
    ) -> BreakerStateName | None:
        """Add a sample (unless `duration_ms` is None), how late a kill answered (unless
        `kill_overshoot_ms` is None) and the breaker's evidence (unless `healthy` is None),
        all for `tenant`'s calls of `tool`, and give back the call's place `in_flight`;
        returns the breaker's state when there was evidence."""
        nothing = duration_ms is None and healthy is None and kill_overshoot_ms is None
        if nothing and not hedge and in_flight is None:
            return None
        now = now_ms if now_ms is not None else int(time.time() * 1000)
        evidence = "" if healthy is None else ("1" if healthy else "0")
        overshoot = kill_overshoot_of(tool)
        state = await self._record(
            keys=_RECORD_BOTH.keys(
                window=window_key(tenant, tool),
                version=version_key(tenant, tool),
                breaker=breaker_key(tenant, tool),
                overshoot_window=window_key(tenant, overshoot),
                overshoot_version=version_key(tenant, overshoot),
                hedge_bucket=hedge.key if hedge else window_key(tenant, overshoot),
                in_flight=in_flight_key(tenant),
            ),
            args=_RECORD_BOTH.argv(
                now_ms=now,
                member=_member(duration_ms, censored),
                window_ms=self.window.window_ms,
                max_samples=self.window.max_samples,
                evidence=evidence,
                failure_threshold=self.breaker.threshold,
                cooldown_ms=self.breaker.cooldown_ms,
                overshoot_member=_member(kill_overshoot_ms, False),
                hedge_share=hedge.share_units if hedge else "",
                hedge_cap=hedge.cap_units if hedge else 0,
                hedge_ttl_ms=hedge.ttl_ms if hedge else 0,
                call_id=in_flight.call_id if in_flight else "",
            ),
        )
        if healthy is None:
            return None
        return "closed" if state == "closed" else "open"


def _member(duration_ms: float | None, censored: bool) -> str:
    if duration_ms is None:
        return ""
    return sample_member(LatencySample(max(0.0, duration_ms), censored))


class CallFeedback:
    def __init__(
        self, window: LatencyWindow, breaker: CircuitBreaker, hedges: HedgeBudget | None = None
    ) -> None:
        self.window = window
        self.recorder = OutcomeRecorder(window, breaker)
        self.hedges = hedges  # None: hedging is off, no identity earns hedges

    async def learn(
        self,
        tenant: str,
        tool: str,
        error: SerfError | None,
        *,
        wall_ms: float,
        granted_ms: int,
        declared_ms: int,
        stop_by_ms: int | None,
        answered_ms: float,
        agent: str | None = None,
        in_flight: InFlight | None = None,
    ) -> None:
        """Record one finished call of `tenant`'s: its outcome (`error`, None for a result),
        the wall time it took, the time it was granted, and when it answered against the
        sandbox's deadline (`stop_by_ms`); with `agent`, the identity's hedge share; with
        `in_flight`, its place among the tenant's calls in flight is given back."""
        timed_out = error is not None and error.code is ErrorCode.TOOL_TIMEOUT
        cancelled = error is not None and error.code is ErrorCode.CANCELLED
        duration: float | None = None
        if error is None or error.code not in NOT_RUN:
            duration = granted_ms if timed_out else wall_ms
        overshoot: float | None = None
        if timed_out:
            assert error is not None
            # How late the kill answered. A kill in the sandbox is measured from the call's
            # own start there: a cold sandbox start before it is not lateness of the kill.
            # A call the gateway cut (its usage counts from before the sandbox was ready)
            # and a call the executor cut at the sandbox's deadline are late past that.
            late = answered_ms - stop_by_ms if stop_by_ms is not None else 0.0
            cut_by_gateway = error.details.get("killed_by") == "gateway"
            overrun = 0.0 if cut_by_gateway else wall_ms - granted_ms
            overshoot = max(0.0, overrun, late)
        if error is None:
            healthy: bool | None = True
        else:
            fault = counts_against_tool(error.code, granted_ms=granted_ms, declared_ms=declared_ms)
            healthy = False if fault else None
        await self.recorder.record(
            tenant,
            tool,
            duration_ms=duration,
            censored=timed_out or cancelled,
            healthy=healthy,
            kill_overshoot_ms=overshoot,
            hedge=self.hedges.deposit(tenant, agent) if self.hedges and agent else None,
            in_flight=in_flight,
        )
