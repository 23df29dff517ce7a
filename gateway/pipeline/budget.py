"""Stage 4, budget: the rate limit per identity x target, then the call's time budget.

Time allocation is a pluggable `TimeAllocator` so ATBA (deadline split across a planned
chain, from latency windows) slots in without touching the rest. The default one grants the
tool's declared timeout, cut to what is left before the run's deadline.
"""

from __future__ import annotations

import time
from typing import Protocol

from gateway.errors import GatewayError
from gateway.pipeline.context import RequestContext
from gateway.rate_limit import RateLimiter
from protocol.serf import ErrorCode


class TimeAllocator(Protocol):
    """Decides how many ms a call may run; raises GatewayError(BUDGET_EXHAUSTED) to refuse."""

    async def allocate(self, ctx: RequestContext) -> int | None: ...


class DeadlineClamp:
    """The tool's declared timeout, never past the deadline; a passed deadline refuses."""

    async def allocate(self, ctx: RequestContext) -> int | None:
        declared = ctx.tool.spec.intent.timeout_ms if ctx.tool is not None else None
        deadline = ctx.tool_context.deadline_ms if ctx.tool_context is not None else None
        if deadline is None:
            return declared
        left = deadline - int(time.time() * 1000)
        if left <= 0:
            raise GatewayError.of(
                ErrorCode.DEADLINE_EXCEEDED,
                f"the run's deadline passed {-left} ms ago; nothing was started",
            )
        return left if declared is None else min(declared, left)


class Budget:
    name = "budget"

    def __init__(self, limiter: RateLimiter, allocator: TimeAllocator | None = None) -> None:
        self.limiter = limiter
        self.allocator: TimeAllocator = allocator or DeadlineClamp()

    async def __call__(self, ctx: RequestContext) -> None:
        principal = ctx.require_principal()
        target = ctx.tool_name or (f"state:{ctx.namespace}" if ctx.namespace else None)
        if target is not None:
            decision = await self.limiter.take(f"{principal.tenant}/{principal.agent}", target)
            if not decision.allowed:
                raise GatewayError.of(
                    ErrorCode.RATE_LIMITED,
                    f"{principal.tenant}/{principal.agent} is over its rate limit for {target}"
                    f" ({self.limiter.rate_per_s:g}/s, burst {self.limiter.burst})",
                    retry_after_ms=decision.retry_after_ms,
                )
        ctx.granted_ms = await self.allocator.allocate(ctx)
