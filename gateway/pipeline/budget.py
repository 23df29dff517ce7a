"""Stage 4, budget: admission (revocation, rate limits, what the allocator reads), then time.

Admission is one Redis script (`gateway.budgets.admission`): a token from an earlier
generation of its agent (revoked, or registered again since) is refused AUTH_REVOKED there,
an agent or a tenant over its bucket RATE_LIMITED with `retry_after_ms`, and so is a tool
call past its tenant's calls in flight (`details.limited_by: tenant_in_flight`; the place it
takes is given back by the account stage). `peek` asks the same script without taking
anything, for a route about to read a large body. Time allocation is
a pluggable `TimeAllocator`, the seam for ATBA (deadline split across a planned chain, from
latency windows): it names what the script reads for it (`reads`), then decides from what
was read (`allocate`); the default grants the tool's declared timeout, cut to what is left
before the run's deadline. The grant and the kill margin land on the context; the dispatch
stage fits the call's limits to them (`tools.calls.time_limit` does the arithmetic).

A request handing an A2A agent work (`ctx.delegated`) is weighed as a call too, under its own
window (`gateway.budgets.allocator`).

Buckets are per identity x target: a tool, `a2a:<agent>` for every request to an A2A agent,
`state:*` for all state operations, `mcp:*` for every MCP message that is not a tool call
(lists, reads, `ping`, notifications), and `refused:*` for calls naming a tool the caller may
not call (authorize's refusal is raised here, after revocation and the rate limit were
checked). No target name is the caller's own text, so the keys a caller can make are bounded
by what the gateway serves.
"""

from __future__ import annotations

import time
from typing import Protocol

from gateway.budgets import (
    Admission,
    AdmissionDecision,
    CallReads,
    HedgeReport,
    InFlight,
    TimedCall,
    TimeGrant,
)
from gateway.gateway_error import GatewayError
from gateway.identity import token_revoked
from gateway.pipeline.context import RequestContext
from protocol import ErrorCode, Principal


class TimeAllocator(Protocol):
    """Decides how long a call may run; raises GatewayError(BUDGET_EXHAUSTED) to refuse."""

    def reads(self, call: TimedCall) -> CallReads:
        """What admission must read for `allocate` (a breaker, latency windows)."""
        ...

    async def allocate(self, call: TimedCall, admitted: AdmissionDecision) -> TimeGrant: ...


class DeadlineClamp:
    """The tool's declared timeout, never past the deadline; a passed deadline refuses."""

    def reads(self, call: TimedCall) -> CallReads:
        return CallReads()

    async def allocate(self, call: TimedCall, admitted: AdmissionDecision) -> TimeGrant:
        declared = call.tool.spec.intent.timeout_ms if call.tool is not None else None
        deadline = call.ask.deadline_ms
        if deadline is None:
            return TimeGrant(declared)
        left = deadline - int(time.time() * 1000)
        if left <= 0:
            raise GatewayError.of(
                ErrorCode.DEADLINE_EXCEEDED,
                f"the run's deadline passed {-left} ms ago; nothing was started",
            )
        return TimeGrant(left if declared is None else min(declared, left))


def _bucket_of(ctx: RequestContext) -> str | None:
    """The bucket a request takes its token from (None: none). Bucket names of groups hold
    a colon, which no tool name does; a group's requests share one, so more namespaces, more
    lists or more wrong names add no rate."""
    if ctx.tool is not None:
        return ctx.tool.name  # the served name, whichever spelling the caller used
    if ctx.tool_refusal is not None:
        return "refused:*"
    if ctx.a2a_agent is not None:
        return f"a2a:{ctx.a2a_agent}"  # a served agent: authorize refused any other
    if ctx.tool_name is not None:  # a pipeline without authorize (tests compose such)
        return ctx.tool_name
    if ctx.namespace is not None:
        return "state:*"
    return "mcp:*" if ctx.transport == "mcp" else None


class BudgetStage:
    name = "budget"

    def __init__(self, admission: Admission, allocator: TimeAllocator | None = None) -> None:
        self.admission = admission
        self.allocator: TimeAllocator = allocator or DeadlineClamp()

    async def __call__(self, ctx: RequestContext) -> None:
        p = ctx.require_principal()
        target = _bucket_of(ctx)
        if ctx.tool is not None:  # a tool call holds a place among its tenant's in flight
            ctx.in_flight = InFlight.for_call(ctx.tool.spec.intent.timeout_ms)
        asked_ms = ctx.limits.timeout_ms if ctx.limits is not None else None
        call = TimedCall(p, ctx.tool, asked_ms, ctx.time_ask, ctx.delegated)
        decision = await self.admission.admit(
            p.tenant, p.agent, p.generation, target, self.allocator.reads(call), ctx.in_flight
        )
        if not decision.allowed:
            ctx.in_flight = None  # refused before a place was taken: nothing to give back
        if (refused := self._refusal(p, target, decision)) is not None:
            raise refused
        if ctx.tool_refusal is not None:
            raise ctx.tool_refusal
        grant = await self.allocator.allocate(call, decision)
        ctx.granted_ms, ctx.kill_margin_ms = grant.granted_ms, grant.kill_margin_ms
        ctx.hedge = HedgeReport(grant.hedge) if grant.hedge is not None else None

    async def peek(self, principal: Principal, target: str) -> GatewayError | None:
        """What admission would refuse `principal` for `target` now (its token revoked, its
        agent or tenant out of rate), taking nothing: asked before a large body is read
        (`gateway.pipeline.header_check`), so such a caller's body never is."""
        p = principal
        decision = await self.admission.admit(p.tenant, p.agent, p.generation, target, peek=True)
        return self._refusal(p, target, decision)

    def _refusal(
        self, p: Principal, target: str | None, decision: AdmissionDecision
    ) -> GatewayError | None:
        if decision.unknown_agent:
            return GatewayError.of(
                ErrorCode.AUTH_INVALID,
                f"this gateway has no registration of {p.tenant}/{p.agent} (never registered"
                " here, or its Redis was emptied): register the agent again and use its new"
                " token",
            )
        if decision.revoked:
            return token_revoked(p)
        if not decision.allowed:
            return self._rate_limited(p.tenant, p.agent, target, decision)
        return None

    def _rate_limited(
        self, tenant: str, agent: str, target: str | None, decision: AdmissionDecision
    ) -> GatewayError:
        if decision.limited_by == "in_flight":
            cap = self.admission.in_flight_max
            return GatewayError.of(
                ErrorCode.RATE_LIMITED,
                f"tenant {tenant} has {cap} tool calls in flight, the most it may run at once"
                " over all its agents (CONCLAVE_TENANT_IN_FLIGHT_MAX): retry once one ends",
                retry_after_ms=decision.retry_after_ms,
                details={"limited_by": "tenant_in_flight", "in_flight_max": cap},
            )
        if decision.limited_by == "tenant" and self.admission.tenant is not None:
            limit = self.admission.tenant
            whose = f"tenant {tenant} is over its rate limit ({limit.per_s:g}/s"
            whose += f", burst {limit.burst}, shared by all its agents)"
        else:
            whose = f"{tenant}/{agent} is over its rate limit for {target}"
            whose += f" ({self.admission.rate_per_s:g}/s, burst {self.admission.burst})"
        return GatewayError.of(
            ErrorCode.RATE_LIMITED, whose, retry_after_ms=decision.retry_after_ms
        )
