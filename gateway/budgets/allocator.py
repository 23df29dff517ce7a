"""The budget stage's ATBA seam: breaker admission, then the call's share of the deadline.

`AtbaAllocator` is the pipeline's `TimeAllocator`. For a tool call with a deadline it reads
the caller's tenant's latency windows of this tool and of the planned calls after it (each
tenant learns from its own calls only, so no tenant can move another's grants) and grants
`allocate_budget`'s share (or refuses with BUDGET_EXHAUSTED); then the tool's circuit
breaker must admit the call (an open circuit refuses before anything starts). The grant
becomes the call's `CallLimits.timeout_ms`, so an overrun is killed by the sandbox; with it
comes the kill margin (the tenant's kill overshoot of this tool, read in the same round
trip) by which the dispatch stage moves the
sandbox's deadline before the run's. Without a deadline the tool's declared timeout (or the
caller's smaller request) applies.

The plan and the reserve come from `X-Conclave-Plan` (comma-separated tool names, this call
first) and `X-Conclave-Reserve` (ms), else the body's `budget`, else MCP `_meta`
(`conclave/plan`, `conclave/reserve_ms`). Planned names the gateway does not serve count with
the default declared timeout, so a typo cannot make the rest of the chain look free.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gateway.budgets.breaker import CircuitBreaker
from gateway.budgets.grant_rule import allocate_budget, planned_chain
from gateway.budgets.latency_window import LatencyWindow, kill_overshoot_of
from gateway.gateway_error import GatewayError
from protocol import PLAN_HEADER, RESERVE_HEADER, ErrorCode, ResourceIntent
from sandbox import fit_timeout, kill_margin_ms
from tools import ToolRegistry

if TYPE_CHECKING:  # the pipeline imports this module; at run time it only needs the shape
    from gateway.pipeline import RequestContext


@dataclass(frozen=True)
class TimeGrant:
    """How long a call may run (None: the tool's own timeout), and how much earlier than the
    run's deadline its sandbox must answer so a kill still answers in time (None: as is)."""

    granted_ms: int | None
    kill_margin_ms: int | None = None


META_PLAN_KEY = "conclave/plan"
META_RESERVE_KEY = "conclave/reserve_ms"
PROBE_GRACE_MS = 2_000  # a probe's lease outlives its grant by the kill and the reply
_DEFAULT_TIMEOUT_MS = ResourceIntent().timeout_ms


def _plan_of(ctx: RequestContext) -> tuple[list[str], int]:
    """(planned tool names, reserve ms) from headers, body or MCP `_meta`, in that order."""
    plan: list[str] = []
    reserve: int | None = None
    header_plan = ctx.headers.get(PLAN_HEADER.lower())
    if header_plan is not None:
        plan = [name.strip() for name in header_plan.split(",") if name.strip()]
    header_reserve = ctx.headers.get(RESERVE_HEADER.lower())
    if header_reserve is not None:
        reserve = _reserve_ms(header_reserve, RESERVE_HEADER)
    if ctx.budget is not None:
        plan = plan or list(ctx.budget.plan)
        reserve = reserve if reserve is not None else ctx.budget.reserve_ms
    meta: Mapping[str, Any] = ctx.meta or {}
    if not plan:
        found = meta.get(META_PLAN_KEY)
        if isinstance(found, list):
            plan = [str(name) for name in found]
        elif isinstance(found, str):
            plan = [name.strip() for name in found.split(",") if name.strip()]
    if reserve is None and META_RESERVE_KEY in meta:
        reserve = _reserve_ms(meta[META_RESERVE_KEY], f"_meta.{META_RESERVE_KEY}")
    return plan, reserve or 0


def _reserve_ms(raw: object, where: str) -> int:
    try:
        value = int(str(raw))
    except ValueError:
        value = -1
    if value < 0:
        raise GatewayError.of(
            ErrorCode.INVALID_REQUEST,
            f"{where} must be a non-negative number of milliseconds",
            param_hints={where: f"got {raw!r}"},
        )
    return value


class AtbaAllocator:
    def __init__(
        self,
        window: LatencyWindow,
        breaker: CircuitBreaker,
        registry: ToolRegistry,
        *,
        margin_ms: int = 10,
        min_grant_ms: int = 10,
    ) -> None:
        self.window = window
        self.breaker = breaker
        self.registry = registry
        self.margin_ms = margin_ms
        self.min_grant_ms = min_grant_ms

    def _declared_ms(self, tool: str) -> int:
        registered = self.registry.get(tool)
        return registered.spec.intent.timeout_ms if registered else _DEFAULT_TIMEOUT_MS

    async def allocate(self, ctx: RequestContext) -> TimeGrant:
        if ctx.tool is None:
            return TimeGrant(None)  # state operations and listings have no time budget
        tool = ctx.tool.name
        tenant = ctx.require_principal().tenant
        asked = ctx.limits.timeout_ms if ctx.limits else None
        ceiling = fit_timeout(ctx.tool.spec.intent.timeout_ms, asked, None)
        deadline = ctx.tool_context.deadline_ms if ctx.tool_context else None
        remaining = None if deadline is None else deadline - time.time() * 1000
        if remaining is None:
            await self.breaker.admit(tenant, tool, probe_ttl_ms=ceiling + PROBE_GRACE_MS)
            return TimeGrant(ceiling)
        plan, reserve = _plan_of(ctx)
        chain = planned_chain(tool, plan)
        timeouts = {name: self._declared_ms(name) for name in chain}
        overshoot = kill_overshoot_of(tool)
        estimates = await self.window.estimates(tenant, {**timeouts, overshoot: 0})
        # Keep back the usual lateness of a kill, as measured here (0 until it is known).
        margin = kill_margin_ms(self.margin_ms, estimates[overshoot].p95_ms)
        grant = allocate_budget(
            remaining_ms=remaining,
            reserve_ms=reserve,
            this=estimates[tool],
            upcoming=[estimates[name] for name in chain[1:]],
            max_ms=ceiling,
            margin_ms=margin,
            min_ms=self.min_grant_ms,
        )
        await self.breaker.admit(
            tenant, tool, probe_ttl_ms=grant.granted_ms + PROBE_GRACE_MS, remaining_ms=remaining
        )
        return TimeGrant(grant.granted_ms, kill_margin_ms=margin)
