"""Stage 4, budget: admission (revocation + rate limit per identity x target), then time.

Admission is one Redis script (`gateway.budgets.admission`): a token from an earlier
generation of its agent (revoked, or registered again since) is refused AUTH_REVOKED there,
an agent over its bucket RATE_LIMITED with `retry_after_ms`. Time allocation is a pluggable
`TimeAllocator`, the seam for ATBA (deadline split across a planned chain, from latency
windows); the default grants the tool's declared timeout, cut to what is left before the
run's deadline. The grant and the kill margin land on the context; the dispatch stage fits
the call's limits to them (`sandbox.time_limit` does the arithmetic).
"""

from __future__ import annotations

import time
from typing import Protocol

from gateway.budgets import Admission, TimeGrant
from gateway.gateway_error import GatewayError
from gateway.pipeline.context import RequestContext
from protocol import ErrorCode


class TimeAllocator(Protocol):
    """Decides how long a call may run; raises GatewayError(BUDGET_EXHAUSTED) to refuse."""

    async def allocate(self, ctx: RequestContext) -> TimeGrant: ...


class DeadlineClamp:
    """The tool's declared timeout, never past the deadline; a passed deadline refuses."""

    async def allocate(self, ctx: RequestContext) -> TimeGrant:
        declared = ctx.tool.spec.intent.timeout_ms if ctx.tool is not None else None
        deadline = ctx.tool_context.deadline_ms if ctx.tool_context is not None else None
        if deadline is None:
            return TimeGrant(declared)
        left = deadline - int(time.time() * 1000)
        if left <= 0:
            raise GatewayError.of(
                ErrorCode.DEADLINE_EXCEEDED,
                f"the run's deadline passed {-left} ms ago; nothing was started",
            )
        return TimeGrant(left if declared is None else min(declared, left))


class BudgetStage:
    name = "budget"

    def __init__(self, admission: Admission, allocator: TimeAllocator | None = None) -> None:
        self.admission = admission
        self.allocator: TimeAllocator = allocator or DeadlineClamp()

    async def __call__(self, ctx: RequestContext) -> None:
        p = ctx.require_principal()
        # Buckets are per identity x tool; all state operations of an identity share one
        # bucket ("state:*": no tool name holds a colon), so more namespaces add no rate.
        target = ctx.tool_name or ("state:*" if ctx.namespace is not None else None)
        decision = await self.admission.admit(p.tenant, p.agent, p.generation, target)
        if decision.revoked:
            raise GatewayError.of(
                ErrorCode.AUTH_REVOKED,
                f"this token of {p.tenant}/{p.agent} was revoked (the agent was revoked or"
                " registered again): use the token of its latest registration",
            )
        if not decision.allowed:
            raise GatewayError.of(
                ErrorCode.RATE_LIMITED,
                f"{p.tenant}/{p.agent} is over its rate limit for {target}"
                f" ({self.admission.rate_per_s:g}/s, burst {self.admission.burst})",
                retry_after_ms=decision.retry_after_ms,
            )
        grant = await self.allocator.allocate(ctx)
        ctx.granted_ms, ctx.kill_margin_ms = grant.granted_ms, grant.kill_margin_ms
