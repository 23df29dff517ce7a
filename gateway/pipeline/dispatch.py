"""Stage 5, dispatch: check the arguments, fit the limits, run the tool (or the operation).

Arguments are validated against the tool's schema before anything runs (INVALID_ARGUMENTS
with a hint per field). The caller's `ResourceRequest` may lower the tool's declared intent,
never raise it (LIMIT_ABOVE_INTENT); the budget stage's grant lowers the timeout further.
Then the `ToolExecutor` (sandbox pool or in-process) runs the call. Non-tool operations (state,
listings) are the context's `action`, performed here so they pass the same stages.
"""

from __future__ import annotations

import time

from gateway.gateway_error import GatewayError
from gateway.pipeline.context import RequestContext
from protocol.serf import ErrorCode
from protocol.time_budget import BudgetGrant
from protocol.tools import ResourceIntent, ResourceRequest
from sandbox.executor import CallLimits, Invocation, ToolExecutor
from tools.registry import ToolArgumentsError


def fit_limits(
    intent: ResourceIntent, request: ResourceRequest | None, granted_ms: int | None
) -> CallLimits:
    """The call's limits: the intent, lowered by the caller's request and the time grant."""
    asked = request or ResourceRequest()
    above = {
        name: f"asked {value}, the tool's intent allows at most {getattr(intent, name)}"
        for name, value in asked.model_dump(exclude_none=True).items()
        if value > getattr(intent, name)
    }
    if above:
        raise GatewayError.of(
            ErrorCode.LIMIT_ABOVE_INTENT,
            "the call asks for more than the tool declares; ask for less or omit the limit",
            param_hints={f"limits.{k}": v for k, v in above.items()},
        )
    timeout = asked.timeout_ms or intent.timeout_ms
    if granted_ms is not None:
        timeout = min(timeout, granted_ms)
    return CallLimits(
        memory_mb=asked.memory_mb or intent.memory_mb,
        cpu_seconds=asked.cpu_seconds or intent.cpu_seconds,
        timeout_ms=max(1, timeout),
        max_output_bytes=intent.max_output_bytes,
    )


class DispatchStage:
    name = "dispatch"

    def __init__(self, executor: ToolExecutor) -> None:
        self.executor = executor

    async def __call__(self, ctx: RequestContext) -> None:
        if ctx.tool is None:
            if ctx.action is not None:
                ctx.executed = True
                ctx.result = await ctx.action(ctx)
            return
        try:
            arguments = ctx.tool.validate(ctx.arguments)
        except ToolArgumentsError as exc:
            raise GatewayError.of(
                ErrorCode.INVALID_ARGUMENTS,
                f"the arguments do not fit {ctx.tool.name}'s schema; see param_hints",
                param_hints=exc.hints,
            ) from exc
        ctx.call_limits = fit_limits(ctx.tool.spec.intent, ctx.limits, ctx.granted_ms)
        assert ctx.tool_context is not None  # scope ran
        invocation = Invocation(
            tool=ctx.tool.name,
            entrypoint=ctx.tool.entrypoint,
            arguments=arguments,
            context=ctx.tool_context,
            limits=ctx.call_limits,
        )
        ctx.executed = True
        outcome = await self.executor.execute(invocation)
        ctx.usage = outcome.usage
        deadline = ctx.tool_context.deadline_ms
        ctx.grant = BudgetGrant(
            granted_ms=ctx.call_limits.timeout_ms,
            remaining_ms=None if deadline is None else deadline - int(time.time() * 1000),
        )
        if outcome.error is not None:
            raise GatewayError(outcome.error)
        ctx.result = outcome.result
