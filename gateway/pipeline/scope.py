"""Stage 2, scope: the request's context (principal, session, trace, deadline).

The context reaches the tool as a `ToolContext` (MCP `_meta` on the wire). It is built from
the principal and headers only: the session id comes from `X-Conclave-Session` (default: the
token's id), the trace from W3C `traceparent` (a new one when absent or malformed), the
deadline from `X-Conclave-Deadline`, the body's `budget`, or MCP `_meta`, in that order.
A request that could not be read or parsed is refused here, after we know who sent it.
"""

from __future__ import annotations

from gateway.gateway_error import GatewayError
from gateway.pipeline.context import RequestContext
from gateway.state import check_session
from protocol import DEADLINE_HEADER, SESSION_HEADER, ErrorCode, ToolContext

META_DEADLINE_KEYS = ("conclave/deadline_ms", "deadline_ms")


def _deadline(ctx: RequestContext) -> int | None:
    raw = ctx.headers.get(DEADLINE_HEADER.lower())
    if raw is not None:
        try:
            value = int(raw)
        except ValueError:
            value = 0
        if value <= 0:
            raise GatewayError.of(
                ErrorCode.INVALID_REQUEST,
                f"{DEADLINE_HEADER} must be a positive unix time in milliseconds",
                param_hints={DEADLINE_HEADER: f"got {raw!r}"},
            )
        return value
    if ctx.budget is not None and ctx.budget.deadline_ms is not None:
        return ctx.budget.deadline_ms
    for key in META_DEADLINE_KEYS:
        found = (ctx.meta or {}).get(key)
        if isinstance(found, int) and not isinstance(found, bool) and found > 0:
            return found
    return None


class ScopeStage:
    name = "scope"

    async def __call__(self, ctx: RequestContext) -> None:
        principal = ctx.require_principal()
        if ctx.input_error is not None:
            raise ctx.input_error
        session = check_session(ctx.headers.get(SESSION_HEADER.lower()) or principal.token_id)
        ctx.tool_context = ToolContext(
            principal=principal,
            session_id=session,
            trace_id=ctx.trace_id,
            traceparent=ctx.traceparent,
            deadline_ms=_deadline(ctx),
        )
