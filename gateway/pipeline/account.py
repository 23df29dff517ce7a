"""Stage 6, account: whatever happened, record it.

An audit record (handed to the background `AuditWriter`), metrics (requests, latency per
operation and per stage, errors by code, rate-limit hits), one structured log line carrying
the trace id, and for a tool call that reached its executor, what the time budgets learn from
it (`CallFeedback`: the latency sample and the breaker's evidence, the caller's tenant's own);
for a delegation under a deadline whose answer was waited for, its time in the agent's own
window (`a2a:<agent>`). A tool call's place among its tenant's calls in flight is given back here
whatever the outcome, in the same round trip (a place never given back lapses in Redis on its
own). Runs as the pipeline's closing stage, so refusals are accounted like answers.
"""

from __future__ import annotations

import logging
import time

from prometheus_client import Counter, Histogram
from redis.exceptions import RedisError

from gateway.budgets import Admission, CallFeedback
from gateway.pipeline.context import RequestContext
from gateway.telemetry import AuditRecord, AuditWriter, GatewayMetrics, Outcome
from protocol import ErrorCode

log = logging.getLogger("conclave.gateway.access")
_CONTENTION = frozenset({ErrorCode.STATE_CONFLICT, ErrorCode.LEASE_HELD})


def audit_record(ctx: RequestContext, duration_s: float) -> AuditRecord:
    principal = ctx.principal
    error = ctx.error
    return AuditRecord(
        at_ms=int(time.time() * 1000),
        trace_id=ctx.trace_id,
        tenant=principal.tenant if principal else "",
        agent=principal.agent if principal else "",
        obo=(principal.obo or "") if principal else "",
        session=ctx.tool_context.session_id if ctx.tool_context else "",
        transport=ctx.transport,
        operation=ctx.operation,
        tool=ctx.tool_name or "",
        namespace=ctx.namespace or "",
        a2a_agent=ctx.a2a_agent or "",
        chain=ctx.chain.acting_for,
        outcome=_outcome(ctx),
        code=error.code.value if error else "",
        stage=ctx.failed_stage or "",
        duration_ms=round(duration_s * 1000, 3),
        usage=ctx.usage.model_dump(mode="json") if ctx.usage else None,
        deadline_ms=ctx.tool_context.deadline_ms if ctx.tool_context else None,
        granted_ms=ctx.granted_ms,
        acted_by=ctx.acted_by,
        hedge=ctx.hedge.summary() if ctx.hedge is not None else None,
    )


def _outcome(ctx: RequestContext) -> Outcome:
    error = ctx.error
    if error is None:
        return "ok"
    if error.code is ErrorCode.CANCELLED:
        return "cancelled"
    return "failed" if ctx.executed else "refused"


class AccountStage:
    name = "account"

    def __init__(
        self,
        audit: AuditWriter,
        metrics: GatewayMetrics,
        feedback: CallFeedback | None = None,
        admission: Admission | None = None,  # gives back a call's place in flight
    ) -> None:
        self.audit = audit
        self.metrics = metrics
        self.feedback = feedback
        self.admission = admission
        # Labelled children, looked up once: `labels()` takes a lock and builds a key per call.
        # Bounded by what the gateway serves (unknown tool names are one label), so no eviction.
        self._requests: dict[tuple[str, str, str], Counter] = {}
        self._latency: dict[str, Histogram] = {}
        self._stage_latency: dict[str, Histogram] = {}

    async def __call__(self, ctx: RequestContext) -> None:
        duration = time.perf_counter() - ctx.started
        record = audit_record(ctx, duration)
        m = self.metrics
        # Label by what the gateway serves: an arbitrary unknown name must not mint a series.
        operation = ctx.tool.name if ctx.tool else ctx.operation
        if ctx.tool is None and ctx.tool_name is not None:
            operation = "(unresolved tool)"
        operation = m.operation_label(operation)  # never the caller's own text
        key = (ctx.transport, operation, record.outcome)
        if (requests := self._requests.get(key)) is None:
            requests = self._requests[key] = m.requests.labels(*key)
        requests.inc()
        if (latency := self._latency.get(operation)) is None:
            latency = self._latency[operation] = m.latency.labels(operation)
        latency.observe(duration)
        for stage, seconds in ctx.stage_seconds.items():
            if (stage_latency := self._stage_latency.get(stage)) is None:
                stage_latency = self._stage_latency[stage] = m.stage_latency.labels(stage)
            stage_latency.observe(seconds)
        if ctx.error is not None:
            m.errors.labels(ctx.error.code.value).inc()
            if ctx.error.code is ErrorCode.RATE_LIMITED:
                m.rate_limited.labels(operation).inc()
        # Answers and contention (a conflict or a held lease: the agent's ordinary retry path,
        # thousands a second under load) log at debug, other refusals and failures at info;
        # the audit stream and the metrics record every one of them either way.
        quiet = ctx.error is None or ctx.error.code in _CONTENTION
        level = logging.DEBUG if quiet else logging.INFO
        if log.isEnabledFor(level):
            log.log(level, "request", extra=record.model_dump(exclude={"id"}))
        self.audit.submit(record)
        await self._settle(ctx)

    async def _settle(self, ctx: RequestContext) -> None:
        """What the budgets learn from a tool call that ran, in one round trip with its place
        among its tenant's calls in flight given back; a call that never ran gives back its
        place alone. Both after its audit record is handed over, so no record waits on them.
        Giving a place back is best effort: one Redis failed to take back lapses on its own
        (after the tool's timeout)."""
        in_flight, ctx.in_flight = ctx.in_flight, None
        if self.admission is None:
            in_flight = None  # no place was taken: nothing to give back
        call, usage, answered = ctx.invocation, ctx.usage, ctx.answered_ms
        sample = ctx.delegation_sample
        # A delegation ATBA planned (under a deadline): its time, in its own window. One
        # without a deadline is not timed, so the plain hop costs no Redis round trip here.
        if ctx.delegated is not None and ctx.granted_ms is not None and sample and self.feedback:
            await self.feedback.recorder.record(
                ctx.require_principal().tenant,
                ctx.delegated.window,
                duration_ms=sample.duration_ms,
                censored=sample.censored,
                healthy=None,
            )
            return
        if self.feedback is None or ctx.tool is None or call is None or usage is None:
            if in_flight is None or self.admission is None:
                return  # not a tool call, or no outcome came back from its executor
            try:
                await self.admission.release(ctx.require_principal().tenant, in_flight)
            except RedisError as lost:
                log.warning("in-flight place not given back (it lapses on its own): %s", lost)
            return
        assert answered is not None  # set by dispatch with the outcome
        await self.feedback.learn(
            ctx.require_principal().tenant,
            ctx.tool.name,
            ctx.error,
            wall_ms=usage.wall_ms,
            granted_ms=call.limits.timeout_ms,
            declared_ms=ctx.tool.spec.intent.timeout_ms,
            stop_by_ms=call.context.deadline_ms,
            answered_ms=answered,
            agent=ctx.require_principal().agent,
            in_flight=in_flight,
        )
