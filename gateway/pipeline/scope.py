"""Stage 2, scope: the request's context (principal, session, trace, deadline).

The context reaches the tool as a `ToolContext` (MCP `_meta` on the wire). It is built from
the principal and headers only: the session id comes from `X-Conclave-Session` (default: the
token's id), the trace from W3C `traceparent` (a new one when absent or malformed), the
deadline from `X-Conclave-Deadline`, the body's `budget`, or MCP `_meta`, in that order.
What the caller asks of the request's time (deadline, plan, reserve, hedging) is read here
once, into the context's `TimeAsk` the budget stage's allocator takes.
A request that could not be read or parsed is refused here, after we know who sent it.
"""

from __future__ import annotations

from gateway.budgets import PlanBounds, read_time_ask
from gateway.pipeline.context import RequestContext
from gateway.state import check_session
from protocol import SESSION_HEADER, ToolContext


class ScopeStage:
    name = "scope"

    def __init__(self, plan_bounds: PlanBounds | None = None) -> None:
        self.plan_bounds = plan_bounds or PlanBounds()

    async def __call__(self, ctx: RequestContext) -> None:
        principal = ctx.require_principal()
        if ctx.input_error is not None:
            raise ctx.input_error
        session = check_session(ctx.headers.get(SESSION_HEADER.lower()) or principal.token_id)
        ctx.time_ask = ask = read_time_ask(ctx.headers, ctx.budget, ctx.meta, self.plan_bounds)
        ctx.tool_context = ToolContext(
            principal=principal,
            session_id=session,
            trace_id=ctx.trace_id,
            traceparent=ctx.traceparent,
            deadline_ms=ask.deadline_ms,
        )
