"""Around every tool execution: latency samples, the breaker's evidence, precise SERF codes.

`GuardedExecutor` wraps the gateway's `ToolExecutor` (sandbox pool or in-process), so the
dispatch stage is unchanged. After each call (the sample and the breaker's evidence in one
Redis round trip, see `gateway.budgets.outcome`) it

- records the call's wall time in the tool's latency window; a call killed at its limit
  (`TOOL_TIMEOUT`) is recorded *censored* at that limit: it would have taken at least that;
  and how late the kill answered past the grant (`KILL_OVERSHOOT`), which the allocator
  keeps back from later grants so a killed call still answers before the deadline;
- tells the tool's circuit breaker whether the call was evidence of a healthy tool;
- turns a tool's exception, reported by the runner as `TOOL_FAILED` with its type name, into
  the code `tools.tool_exceptions` maps that type to (a rate limit, a conflict, a flaky
  upstream...);
- puts the grant and the time left before the deadline into a failure's `details`;
- after a kill that tore the sandbox down (its runner did not answer, or the gateway cut the
  call at the deadline), starts a replacement for the same identity in the background, so
  the retry that ATBA's kill invites is not a cold start. (A kill the runner reports leaves
  the sandbox warm.)
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace
from typing import Protocol, runtime_checkable

import anyio

from gateway.budgets.breaker import CircuitBreaker, counts_against_tool
from gateway.budgets.latency_window import KILL_OVERSHOOT, LatencyWindow, kill_margin_ms
from gateway.budgets.outcome import OutcomeRecorder
from protocol.serf import ErrorCode, SerfError
from protocol.tools import CallUsage, ExitReason
from sandbox.executor import CallLimits, Invocation, Outcome, ToolExecutor
from tools.registry import ToolRegistry
from tools.tool_exceptions import tool_exception_code

log = logging.getLogger("conclave.gateway.budgets")


@runtime_checkable
class _Prewarming(Protocol):
    async def prewarm(self, tenant: str, agent: str, limits: CallLimits) -> None: ...


# Failures decided before the tool did any work: they say nothing about its latency.
_NOT_RUN = frozenset(
    {ErrorCode.INVALID_ARGUMENTS, ErrorCode.TOOL_NOT_FOUND, ErrorCode.SANDBOX_UNAVAILABLE}
)


def _cut_by_gateway(error: SerfError | None) -> bool:
    return error is not None and error.details.get("killed_by") == "gateway"


def _sandbox_lost(error: SerfError | None) -> bool:
    """Whether a kill took the sandbox with it (the pool then recycles it)."""
    details = error.details if error is not None else {}
    return bool(details.get("sandbox_killed")) or _cut_by_gateway(error)


def refine_tool_error(error: SerfError) -> SerfError:
    """A runner's `TOOL_FAILED` becomes the code its exception type maps to, if any."""
    if error.code is not ErrorCode.TOOL_FAILED:
        return error
    exc_type = error.details.get("type")
    code = tool_exception_code(exc_type) if isinstance(exc_type, str) else ErrorCode.TOOL_FAILED
    if code is ErrorCode.TOOL_FAILED:
        return error
    return SerfError.of(
        code,
        error.message,
        param_hints=error.param_hints,
        trace_id=error.trace_id,
        details=error.details,
    )


class GuardedExecutor:
    def __init__(
        self,
        inner: ToolExecutor,
        window: LatencyWindow,
        breaker: CircuitBreaker,
        registry: ToolRegistry,
        *,
        margin_ms: int = 10,
    ) -> None:
        self.inner = inner
        self.margin_ms = margin_ms
        self.window = window
        self.breaker = breaker
        self.registry = registry
        self.recorder = OutcomeRecorder(window, breaker)
        self._warming: set[asyncio.Task[None]] = set()

    @property
    def name(self) -> str:
        return self.inner.name

    async def execute(self, invocation: Invocation) -> Outcome:
        stopping = await self._stopping_in_time(invocation)
        outcome = await self._execute_by_deadline(stopping, invocation.context.deadline_ms)
        answered_ms = time.time() * 1000
        error = outcome.error
        granted = invocation.limits.timeout_ms
        timed_out = error is not None and error.code is ErrorCode.TOOL_TIMEOUT
        duration: float | None = None
        if error is None or error.code not in _NOT_RUN:
            duration = granted if timed_out else outcome.usage.wall_ms
        if timed_out:
            # How late the kill answered. A kill in the sandbox is measured from the call's
            # own start there: a cold sandbox start before it is not lateness of the kill.
            # A call the gateway cut (its usage counts from before the sandbox was ready)
            # and a call the executor cut at the (moved) deadline are late past that.
            stop_by = stopping.context.deadline_ms
            late = answered_ms - stop_by if stop_by is not None else 0.0
            overrun = 0.0 if _cut_by_gateway(error) else outcome.usage.wall_ms - granted
            await self.window.record(KILL_OVERSHOOT, max(0.0, overrun, late))
            if _sandbox_lost(outcome.error):
                self._replace_sandbox(invocation)
        if error is None:
            await self.recorder.record(invocation.tool, duration_ms=duration, healthy=True)
            return outcome
        error = refine_tool_error(error)
        # The sample and the breaker's evidence (only a fault of the tool's counts) together.
        fault = self._is_tool_fault(invocation, error, granted)
        await self.recorder.record(
            invocation.tool,
            duration_ms=duration,
            censored=timed_out,
            healthy=False if fault else None,
        )
        deadline = invocation.context.deadline_ms
        details = {**error.details, "granted_ms": granted}
        if deadline is not None:
            details["remaining_ms"] = deadline - int(time.time() * 1000)
        if timed_out:
            details.setdefault("censored_sample_ms", granted)
        error = error.model_copy(update={"details": details})
        return Outcome(usage=outcome.usage, result=outcome.result, error=error)

    async def _execute_by_deadline(self, invocation: Invocation, deadline: int | None) -> Outcome:
        """The executor's outcome, or a kill by the gateway's own clock when the sandbox has
        not answered `margin_ms` before the run's deadline (a starved runner can answer its
        own kill, or a result finished past its limit, tens of ms late)."""
        if deadline is None:
            return await self.inner.execute(invocation)
        began = time.monotonic()
        # The fixed margin is left for this guard's bookkeeping and the HTTP reply.
        with anyio.move_on_after((deadline - self.margin_ms) / 1000 - time.time()):
            return await self.inner.execute(invocation)
        wall_ms = (time.monotonic() - began) * 1000
        error = SerfError.of(
            ErrorCode.TOOL_TIMEOUT,
            f"the call ran past its wall-clock limit of {invocation.limits.timeout_ms} ms"
            " and was killed by the gateway at the run's deadline",
            details={"timeout_ms": invocation.limits.timeout_ms, "killed_by": "gateway"},
        )
        usage = CallUsage(wall_ms=wall_ms, exit_reason=ExitReason.TIMEOUT)
        return Outcome(usage=usage, error=error)

    async def _stopping_in_time(self, invocation: Invocation) -> Invocation:
        """The invocation with its deadline moved earlier by what a kill and the reply take.

        The grant already leaves that margin, but the executor may spend part of the grant
        getting a sandbox (a cold start): it then cuts the call, or gives up, at the
        context's deadline; moved earlier, a call cut there still answers by the run's own.
        """
        deadline = invocation.context.deadline_ms
        if deadline is None:
            return invocation
        margin = await kill_margin_ms(self.window, self.margin_ms)
        context = invocation.context.model_copy(update={"deadline_ms": deadline - margin})
        return replace(invocation, context=context)

    def _is_tool_fault(self, invocation: Invocation, error: SerfError, granted: int) -> bool:
        registered = self.registry.get(invocation.tool)
        declared = registered.spec.intent.timeout_ms if registered else granted
        return counts_against_tool(error.code, granted_ms=granted, declared_ms=declared)

    def _replace_sandbox(self, invocation: Invocation) -> None:
        if not isinstance(self.inner, _Prewarming):
            return
        principal = invocation.context.principal
        task = asyncio.create_task(self._prewarm(principal.tenant, principal.agent, invocation))
        self._warming.add(task)
        task.add_done_callback(self._warming.discard)

    async def _prewarm(self, tenant: str, agent: str, invocation: Invocation) -> None:
        assert isinstance(self.inner, _Prewarming)
        try:
            await self.inner.prewarm(tenant, agent, invocation.limits)
        except Exception:  # a warm start is a courtesy; the next call starts one anyway
            log.info("could not pre-warm a sandbox for %s/%s", tenant, agent, exc_info=True)

    async def aclose(self) -> None:
        for task in list(self._warming):
            task.cancel()
        await asyncio.gather(*self._warming, return_exceptions=True)
        await self.inner.aclose()
