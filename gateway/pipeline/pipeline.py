"""The pipeline: stages run in order; the closing stages (account) run whatever happened.

Composed once per app by `gateway.assembly`; every transport (HTTP tool routes, MCP, state
routes) builds a `RequestContext` and calls `Pipeline.run`. A refusal stops the remaining
stages, becomes the context's SERF error (through the one `translate`), and is accounted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from gateway.gateway_error import translate
from gateway.pipeline.context import RequestContext, Stage

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
        for stage in self.stages:
            began = time.perf_counter()
            try:
                await stage(ctx)
            except Exception as exc:
                ctx.error = translate(exc, ctx.trace_id)
                ctx.failed_stage = stage.name
                break
            finally:
                ctx.stage_seconds[stage.name] = time.perf_counter() - began
        for stage in self.closing:
            began = time.perf_counter()
            try:
                await stage(ctx)
            except Exception:  # accounting must never turn an answer into a failure
                log.exception("closing stage %s failed", stage.name)
            finally:
                ctx.stage_seconds[stage.name] = time.perf_counter() - began
        return ctx
