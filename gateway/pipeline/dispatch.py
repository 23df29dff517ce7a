"""Stage 5, dispatch: fit the call's limits, run the tool (or the operation).

The caller's `ResourceRequest` may lower the tool's declared intent, never raise it
(LIMIT_ABOVE_INTENT); the budget stage's grant lowers the timeout further, and its kill
margin moves the sandbox's deadline before the run's (the arithmetic is `tools.calls.time_limit`'s,
the one owner of a call's time limit). Then the `ToolExecutor` (sandbox pool or in-process)
runs the call; the executor validates the arguments against the tool's schema, once, where
the tool runs (INVALID_ARGUMENTS with a hint per field, and nothing ran). As a backstop the
gateway stops waiting at the run's deadline less the reply margin, whatever the sandbox does.
Non-tool operations (state, listings) are the context's `action`, performed here so they
pass the same stages (after the context's `on_admitted`, as a call).

While an MCP call (or a source's read or prompt, which may wait on the client) runs it is in
the replica's `InflightCalls`, under its caller's identity and request id, so a
`notifications/cancelled` received by any replica pulls its cancel switch.
A call the switch stops has its usage up to then (exit reason `cancelled`): the account stage
records its wall time as a censored latency sample.

A call the budget stage chose to hedge (an idempotent tool's, `ctx.hedge`) runs as a race of
at most two attempts (`gateway.budgets.HedgeRace`); the grant says whether a hedge ran and
won, and the trace span what ATBA decided.
"""

from __future__ import annotations

import time

import anyio

from gateway.budgets import HedgeRace, HedgeReport
from gateway.cancellation import InflightCalls, call_key
from gateway.gateway_error import GatewayError
from gateway.pipeline.context import RequestContext
from gateway.telemetry import NOT_RECORDED, TRACING, SpanRecord, mark_failed
from protocol import (
    TRACEBACK_DETAIL,
    BudgetGrant,
    CallUsage,
    ErrorCode,
    ExitReason,
    ResourceIntent,
    ResourceRequest,
    SerfError,
)
from tools.calls import (
    CallLimits,
    Invocation,
    Outcome,
    ToolExecutor,
    fit_timeout,
    gateway_wait_s,
    sandbox_deadline_ms,
)


def fit_limits(
    intent: ResourceIntent, request: ResourceRequest | None, granted_ms: int | None
) -> CallLimits:
    """The call's limits: the intent, lowered by the caller's request and the time grant."""
    asked = request.model_dump(exclude_none=True) if request is not None else {}
    above = {
        name: f"asked {value}, the tool's intent allows at most {getattr(intent, name)}"
        for name, value in asked.items()
        if value > getattr(intent, name)
    }
    if above:
        raise GatewayError.of(
            ErrorCode.LIMIT_ABOVE_INTENT,
            "the call asks for more than the tool declares; ask for less or omit the limit",
            param_hints={f"limits.{k}": v for k, v in above.items()},
        )
    return CallLimits(
        memory_mb=asked.get("memory_mb") or intent.memory_mb,
        cpu_seconds=asked.get("cpu_seconds") or intent.cpu_seconds,
        timeout_ms=fit_timeout(intent.timeout_ms, asked.get("timeout_ms"), granted_ms),
        max_output_bytes=intent.max_output_bytes,
    )


class DispatchStage:
    name = "dispatch"

    def __init__(
        self,
        executor: ToolExecutor,
        *,
        reply_margin_ms: int = 0,
        inflight: InflightCalls | None = None,
        hedging: HedgeRace | None = None,
    ) -> None:
        self.executor = executor
        self.hedging = hedging  # runs a hedged call's attempts; None: hedging is off
        self.reply_margin_ms = reply_margin_ms  # the gateway's backstop answers this early
        self.inflight = inflight  # where `notifications/cancelled` finds an MCP call

    async def __call__(self, ctx: RequestContext) -> None:
        if ctx.tool is None:
            if ctx.action is not None:
                if ctx.on_admitted is not None:  # a read's retry: its answers, opened
                    await ctx.on_admitted(ctx)
                ctx.executed = True
                inflight = self.inflight
                if ctx.cancel is not None and ctx.request_id is not None and inflight is not None:
                    # A source's read or prompt, which may wait on its client: cancellable.
                    key = call_key(ctx.require_principal(), ctx.request_id)
                    with inflight.running(key, ctx.cancel):
                        ctx.result = await ctx.action(ctx)
                else:
                    ctx.result = await ctx.action(ctx)
            return
        if ctx.on_admitted is not None:
            await ctx.on_admitted(ctx)
        limits = fit_limits(ctx.tool.spec.intent, ctx.limits, ctx.granted_ms)
        assert ctx.tool_context is not None  # scope ran
        deadline = ctx.tool_context.deadline_ms
        context = ctx.tool_context
        stop_by = sandbox_deadline_ms(deadline, ctx.kill_margin_ms)
        changes: dict[str, int | str | None] = {}
        if stop_by != deadline:
            changes["deadline_ms"] = stop_by
        span = _execute_span(ctx.tool.name, limits.timeout_ms)
        if span is not NOT_RECORDED:  # the tool's W3C `traceparent` names its execution
            changes["traceparent"] = span.traceparent
        if changes:
            context = context.model_copy(update=changes)
        ctx.invocation = Invocation(
            tool=ctx.tool.name,
            entrypoint=ctx.tool.entrypoint,
            placement=ctx.tool.placement,
            arguments=ctx.arguments,
            context=context,
            limits=limits,
            network=ctx.tool.network,
            events=ctx.events,
            client=ctx.client,
        )
        ctx.executed = True
        began = time.monotonic()
        try:
            if ctx.cancel is not None and ctx.request_id is not None and self.inflight is not None:
                key = call_key(ctx.require_principal(), ctx.request_id)
                with self.inflight.running(key, ctx.cancel):
                    outcome = await self._execute(ctx.invocation, deadline, ctx.hedge, span)
            else:
                outcome = await self._execute(ctx.invocation, deadline, ctx.hedge, span)
        except anyio.get_cancelled_exc_class():
            if ctx.cancel is not None and ctx.cancel.pulled:  # stopped by its cancel switch
                ctx.answered_ms = time.time() * 1000
                wall_ms = (time.monotonic() - began) * 1000
                ctx.usage = CallUsage(wall_ms=wall_ms, exit_reason=ExitReason.CANCELLED)
            raise
        ctx.answered_ms = time.time() * 1000
        error = outcome.error
        if error is not None and error.code is ErrorCode.INVALID_ARGUMENTS:
            # The executor refused the arguments before the tool ran: a refusal of the
            # caller's input, answered as one (no usage, no grant), and nothing to learn from.
            ctx.executed, ctx.invocation = False, None
            raise GatewayError(error)
        ctx.usage = outcome.usage
        remaining = None if deadline is None else deadline - int(time.time() * 1000)
        hedge = ctx.hedge
        ctx.grant = BudgetGrant(
            granted_ms=limits.timeout_ms,
            remaining_ms=remaining,
            hedged=hedge is not None and hedge.started,
            hedge_won=hedge is not None and hedge.winner == "hedge",
        )
        if error is not None:
            error = _for_caller(error, ctx.show_traceback)
            raise GatewayError(_with_grant(error, limits.timeout_ms, remaining, ctx.grant.hedged))
        if outcome.input_required is not None:  # a round of questions: /mcp asks the client
            ctx.result = outcome.input_required
            return
        # An executor outside this tree may answer a bare value: it is the tool's return value.
        ctx.result = outcome.output or ctx.tool.result_of(outcome.result)

    async def _execute(
        self,
        invocation: Invocation,
        deadline: int | None,
        hedge: HedgeReport | None,
        span: SpanRecord,
    ) -> Outcome:
        """The call, in a traced request inside `span` (opened here rather than in a coroutine
        of its own: one frame less to resume at every await), described by the executor's own
        timings (wall, CPU, peak memory, the wait for a sandbox: queue and start)."""
        if span is NOT_RECORDED:
            return await self._execute_by_deadline(invocation, deadline, hedge)
        with span:
            outcome = await self._execute_by_deadline(invocation, deadline, hedge)
            usage = outcome.usage
            timings: dict[str, str | float | int] = {
                "conclave.wall_ms": usage.wall_ms,
                "conclave.cpu_ms": usage.cpu_ms,
                "conclave.peak_rss_kb": usage.peak_rss_kb,
                "conclave.exit_reason": usage.exit_reason.value,
            }
            if usage.sandbox is not None:
                timings["conclave.sandbox"] = usage.sandbox
            if outcome.waited_ms is not None:
                timings["conclave.sandbox.waited_ms"] = outcome.waited_ms
            span.set_attributes(timings)
            if stages := outcome.start_stages:  # the call waited for its sandbox's start
                start = TRACING.timed_span("sandbox start", stages[0].start_ns, stages[-1].end_ns)
                for stage in stages:
                    name = f"sandbox {stage.name}"
                    part = TRACING.timed_span(name, stage.start_ns, stage.end_ns, start)
                    if stage.cpu_ms is not None:
                        part.set_attribute("conclave.sandbox.cpu_ms", round(stage.cpu_ms, 1))
            if hedge is not None:
                span.set_attributes(hedge.attributes())
            if outcome.error is not None:
                mark_failed(span, outcome.error)
            return outcome

    async def _execute_by_deadline(
        self, invocation: Invocation, deadline: int | None, hedge: HedgeReport | None
    ) -> Outcome:
        """The executor's outcome, or a kill by the gateway's own clock when the sandbox has
        not answered `reply_margin_ms` before the run's deadline (a starved runner can answer
        its own kill, or a result finished past its limit, tens of ms late)."""
        if deadline is None:
            return await self._run(invocation, hedge)
        began = time.monotonic()
        with anyio.move_on_after(gateway_wait_s(deadline, self.reply_margin_ms)):
            return await self._run(invocation, hedge)
        wall_ms = (time.monotonic() - began) * 1000
        error = SerfError.of(
            ErrorCode.TOOL_TIMEOUT,
            f"the call ran past its wall-clock limit of {invocation.limits.timeout_ms} ms"
            " and was killed by the gateway at the run's deadline",
            details={"timeout_ms": invocation.limits.timeout_ms, "killed_by": "gateway"},
        )
        usage = CallUsage(wall_ms=wall_ms, exit_reason=ExitReason.TIMEOUT)
        return Outcome(usage=usage, error=error)

    async def _run(self, invocation: Invocation, hedge: HedgeReport | None) -> Outcome:
        if hedge is not None and hedge.plan.hedges and self.hedging is not None:
            return await self.hedging.run(invocation, hedge)
        return await self.executor.execute(invocation)


def _execute_span(tool: str, granted_ms: int) -> SpanRecord:
    """The span of a call's execution ("execute <tool>"), made before the tool's context so
    the context names it; NOT_RECORDED outside a traced request."""
    if not TRACING.on:
        return NOT_RECORDED
    return TRACING.span(
        f"execute {tool}", {"conclave.tool": tool, "conclave.budget.granted_ms": granted_ms}
    )


def _for_caller(error: SerfError, show_traceback: bool) -> SerfError:
    """The failure as the caller may see it: the tool's own traceback (from the runner) only
    for the tools' author who asked for it; it names the tool's files and lines, which are
    the operator's, not the caller's."""
    if show_traceback or TRACEBACK_DETAIL not in error.details:
        return error
    details = {k: v for k, v in error.details.items() if k != TRACEBACK_DETAIL}
    return error.model_copy(update={"details": details})


def _with_grant(
    error: SerfError, granted_ms: int, remaining_ms: int | None, hedged: bool
) -> SerfError:
    """The failure with the grant, the time left before the deadline and whether a hedge
    ran beside it in its `details`."""
    details = {**error.details, "granted_ms": granted_ms}
    if hedged:
        details["hedged"] = True
    if remaining_ms is not None:
        details["remaining_ms"] = remaining_ms
    if error.code is ErrorCode.TOOL_TIMEOUT:
        details.setdefault("censored_sample_ms", granted_ms)
    return error.model_copy(update={"details": details})
