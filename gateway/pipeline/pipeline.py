"""The pipeline: stages run in order; the closing stages (account) run whatever happened.

Composed once per app by `gateway.assembly`; every transport (HTTP tool routes, MCP, state
routes) builds a `RequestContext` and calls `Pipeline.run`. A refusal stops the remaining
stages, becomes the context's SERF error (through the one `translate`), and is accounted.
While tracing is on, each stage runs in its own span, and the request's span is described
(tenant, agent, tool, grant, SERF code) before the closing stages run.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from gateway.gateway_error import translate
from gateway.pipeline.context import RequestContext, Stage
from gateway.tracing import TRACING, SpanRecord, mark_failed, recording_span

log = logging.getLogger("conclave.gateway.pipeline")


class Pipeline:
    def __init__(self, stages: Sequence[Stage], closing: Sequence[Stage] = ()) -> None:
        self.stages = tuple(stages)
        self.closing = tuple(closing)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in (*self.stages, *self.closing))

    async def run(self, ctx: RequestContext) -> RequestContext:
        """Run `ctx` through every stage; never raises for a refusal or a tool's failure."""
        # Stage spans only in a traced request (see `Tracing.request_span`).
        request_span = recording_span() if TRACING.on else None
        traced = request_span is not None
        for stage in self.stages:
            began = time.perf_counter()
            try:
                await (_traced(stage, ctx) if traced else stage(ctx))
            except Exception as exc:
                ctx.error = translate(exc, ctx.trace_id)
                ctx.failed_stage = stage.name
                break
            finally:
                ctx.stage_seconds[stage.name] = time.perf_counter() - began
        if request_span is not None:
            _describe(request_span, ctx)
        for stage in self.closing:
            began = time.perf_counter()
            try:
                await (_traced(stage, ctx) if traced else stage(ctx))
            except Exception:  # accounting must never turn an answer into a failure
                log.exception("closing stage %s failed", stage.name)
            finally:
                ctx.stage_seconds[stage.name] = time.perf_counter() - began
        return ctx


async def _traced(stage: Stage, ctx: RequestContext) -> None:
    """Run `stage` in its own span ("stage <name>"), marked with the SERF code if it refuses.

    Who asked for what is on the request's span, once (`_describe`): an attribute costs
    microseconds, and a request has six stage spans."""
    with TRACING.span(f"stage {stage.name}") as span:
        try:
            await stage(ctx)
        except Exception as exc:
            mark_failed(span, translate(exc, ctx.trace_id))
            raise


def _describe(span: SpanRecord, ctx: RequestContext) -> None:
    """Who asked for what, the time granted, and the SERF code of a failure."""
    attributes: dict[str, str | int] = {"conclave.operation": ctx.operation}
    principal = ctx.principal
    if principal is not None:
        attributes["conclave.tenant"] = principal.tenant
        attributes["conclave.agent"] = principal.agent
    if ctx.tool_name is not None:
        attributes["conclave.tool"] = ctx.tool_name
    if ctx.granted_ms is not None:
        attributes["conclave.budget.granted_ms"] = ctx.granted_ms
    span.set_attributes(attributes)
    if ctx.error is not None:
        mark_failed(span, ctx.error)
