"""The pipeline: stages run in order; the closing stages (account) run whatever happened.

Composed once per app by `gateway.assembly`; every transport (HTTP tool routes, MCP, state
routes) builds a `RequestContext` and calls `Pipeline.run`. A refusal stops the remaining
stages, becomes the context's SERF error (through the one `translate`), and is accounted.
While tracing is on, each stage runs in its own span, and the request's span is described
(tenant, agent, tool, grant, SERF code) before the closing stages run.

Once the scope stage knows the request's deadline, the stages after it run under that
deadline: a stage still waiting `PAST_DEADLINE_GRACE_S` after it passed (a paused or
failing-over Redis, a stalled engine) is cancelled and the request is answered 504
`DEADLINE_EXCEEDED` then, not whenever the store answers. The grace is for the sandbox: it
kills a call at its grant, before the deadline, and on a slow machine its TOOL_TIMEOUT may
arrive a little late; cut off, the call would lose the censored sample and the kill lateness
the budget stage learns from, and the caller the more useful answer. A write cut off may or
may not have been applied: the answer says so, and a retry with the same idempotency key
settles which. The closing stages of a request answered at or past its deadline run after
the answer, not before it: in the task group `closing_late` holds, which the gateway's
lifespan enters around its background work and leaves before it closes the audit and Redis
those stages write to, so a stopping gateway still accounts for what it answered (waiting
`LATE_CLOSING_WAIT_S` at most). A pipeline run outside a serving gateway (a test, a bench)
holds no such group: it closes before answering.

A tool call with a cancel switch (`RequestContext.cancel`, `gateway.cancellation`) runs its
stages in the switch's scope: pulled (the caller cancelled, or its connection closed), the
stage running is cancelled where it awaits, the call's error is CANCELLED, and the closing
stages account for it as for any other outcome.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import anyio
from anyio.abc import TaskGroup

from gateway.gateway_error import GatewayError, translate
from gateway.pipeline.context import RequestContext, Stage
from gateway.telemetry import TRACING, SpanRecord, mark_failed, recording_span
from protocol import ErrorCode

log = logging.getLogger("conclave.gateway.pipeline")

PAST_DEADLINE_GRACE_S = 0.2  # how long past its deadline a stage may still answer
LATE_CLOSING_WAIT_S = 5.0  # how long leaving `closing_late` waits for closing stages running


class Pipeline:
    def __init__(self, stages: Sequence[Stage], closing: Sequence[Stage] = ()) -> None:
        self.stages = tuple(stages)
        self.closing = tuple(closing)
        self._late: TaskGroup | None = None  # where closing stages run after the answer
        # Each stage's span name, written once (a traced request makes one span a stage).
        self._span_names = {s.name: f"stage {s.name}" for s in (*self.stages, *self.closing)}

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in (*self.stages, *self.closing))

    @asynccontextmanager
    async def closing_late(self) -> AsyncIterator[None]:
        """Hold the task group in which requests answered at or past their deadline run their
        closing stages; on leaving, wait for those still running, `LATE_CLOSING_WAIT_S` at
        most (the store they write to may be the reason they are late)."""
        async with anyio.create_task_group() as late:
            self._late = late
            try:
                yield
            finally:
                self._late = None
                late.cancel_scope.deadline = anyio.current_time() + LATE_CLOSING_WAIT_S

    async def run(self, ctx: RequestContext) -> RequestContext:
        """Run `ctx` through every stage; never raises for a refusal or a tool's failure."""
        # Stage spans only in a traced request (see `Tracing.request_span`).
        request_span = recording_span() if TRACING.on else None
        traced = request_span is not None
        if ctx.cancel is None:
            await self._open(ctx, traced)
        else:
            with ctx.cancel.scope() as cancelled:
                await self._open(ctx, traced)
            if cancelled.cancelled_caught:
                ctx.error = translate(GatewayError(ctx.cancel.error()), ctx.trace_id)
                ctx.failed_stage = ctx.failed_stage or "dispatch"
        if request_span is not None:
            _describe(request_span, ctx)
        deadline = _deadline_ms(ctx)
        late = self._late
        if late is not None and deadline is not None and time.time() * 1000 >= deadline:
            late.start_soon(self._close, ctx, traced)
        else:
            await self._close(ctx, traced)
        return ctx

    async def _open(self, ctx: RequestContext, traced: bool) -> None:
        """The stages in order, the ones after the deadline is known bounded by it."""
        stages = iter(self.stages)
        for stage in stages:
            if not await self._step(stage, ctx, traced):
                return
            deadline = _deadline_ms(ctx)
            if deadline is not None:
                break
        else:
            return
        running = stage
        with anyio.move_on_after(deadline / 1000 - time.time() + PAST_DEADLINE_GRACE_S) as bound:
            for running in stages:
                if not await self._step(running, ctx, traced):
                    return
        if bound.cancelled_caught:
            ctx.error = translate(_past_deadline(running.name), ctx.trace_id)
            ctx.failed_stage = running.name

    async def _step(self, stage: Stage, ctx: RequestContext, traced: bool) -> bool:
        """Run one stage; False (with the context's error set) when it refused."""
        began = time.perf_counter()
        try:
            if not traced:
                await stage(ctx)
            else:  # the span opened here, not in a coroutine of its own (one frame less)
                with TRACING.span(self._span_names[stage.name]) as span:
                    try:
                        await stage(ctx)
                    except Exception as exc:
                        mark_failed(span, translate(exc, ctx.trace_id))
                        raise
        except Exception as exc:
            ctx.error = translate(exc, ctx.trace_id)
            ctx.failed_stage = stage.name
            return False
        except anyio.get_cancelled_exc_class():
            ctx.failed_stage = stage.name  # the stage a pulled cancel switch stopped
            raise
        finally:
            ctx.stage_seconds[stage.name] = time.perf_counter() - began
        return True

    async def _close(self, ctx: RequestContext, traced: bool) -> None:
        for stage in self.closing:
            began = time.perf_counter()
            try:
                if not traced:
                    await stage(ctx)
                else:
                    with TRACING.span(self._span_names[stage.name]) as span:
                        try:
                            await stage(ctx)
                        except Exception as exc:
                            mark_failed(span, translate(exc, ctx.trace_id))
                            raise
            except Exception:  # accounting must never turn an answer into a failure
                log.exception("closing stage %s failed", stage.name)
            finally:
                ctx.stage_seconds[stage.name] = time.perf_counter() - began


def _deadline_ms(ctx: RequestContext) -> int | None:
    return ctx.tool_context.deadline_ms if ctx.tool_context is not None else None


def _past_deadline(stage: str) -> GatewayError:
    return GatewayError.of(
        ErrorCode.DEADLINE_EXCEEDED,
        f"the request's deadline passed while the gateway was at its {stage} stage (the state"
        " store or the sandbox engine did not answer in time). A write cut off here may or"
        " may not have been applied: retry it with the same idempotency key (or read the key"
        " back) with a new deadline",
    )


def _describe(span: SpanRecord, ctx: RequestContext) -> None:
    """Who asked for what (and for whom), the time granted, and the SERF code of a failure."""
    attributes: dict[str, str | int] = {"conclave.operation": ctx.operation}
    principal = ctx.principal
    if principal is not None:
        attributes["conclave.tenant"] = principal.tenant
        attributes["conclave.agent"] = principal.agent
    if ctx.tool_name is not None:
        attributes["conclave.tool"] = ctx.tool_name
    if ctx.chain.by:  # whom the caller acts for (gateway.delegation), the first first
        attributes["conclave.chain"] = " -> ".join(ctx.chain.acting_for)
    if ctx.granted_ms is not None:
        attributes["conclave.budget.granted_ms"] = ctx.granted_ms
    span.set_attributes(attributes)
    if ctx.error is not None:
        mark_failed(span, ctx.error)
