"""The budget stage's ATBA seam: breaker admission, then the call's share of the deadline.

`AtbaAllocator` is the pipeline's `TimeAllocator`. It names what the admission script must
read (`reads`): the tool's circuit breaker and, for a call with a deadline, the caller's
tenant's latency windows of this tool, of the planned calls after it and of this tool's kill
lateness (each tenant learns from its own calls only, so no tenant can move another's
grants). From what was read (`allocate`), a shut circuit refuses before anything starts,
and the call gets `allocate_budget`'s share (or BUDGET_EXHAUSTED). The grant becomes the
call's `CallLimits.timeout_ms`, so an overrun is killed by the sandbox; with it comes the
kill margin by which the dispatch stage moves the sandbox's deadline before the run's.
Without a deadline the tool's declared timeout (or the caller's smaller request) applies.
A half-open circuit's probe lease is taken in the script, before the grant is known: it
covers the longest grant the call can get.

The plan and the reserve come from `X-Conclave-Plan` (comma-separated tool names, this call
first) and `X-Conclave-Reserve` (ms), else the body's `budget`, else MCP `_meta`
(`conclave/plan`, `conclave/reserve_ms`). Planned names the gateway does not serve count with
the default declared timeout, so a typo cannot make the rest of the chain look free.
A plan is bounded before anything is done with it (`PlanBounds`): more names than
`budget_plan_max`, or a name longer than a served tool name can be, is refused
INVALID_REQUEST naming the limit, before the admission script reads a window for it: every
planned name costs a window read in Redis and a summary on the event loop.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sized
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gateway.budgets.admission import AdmissionDecision, CallReads
from gateway.budgets.breaker import CircuitBreaker
from gateway.budgets.call_plan import plan_call
from gateway.budgets.grant_rule import planned_chain
from gateway.budgets.hedge_budget import HedgeBudget
from gateway.budgets.hedge_rule import DEFAULT_QUANTILE, HedgePlan, plan_fixed_hedge, wait
from gateway.budgets.latency_window import LatencyWindow, kill_overshoot_of
from gateway.gateway_error import GatewayError
from gateway.sources import ENTRYPOINT_PREFIX
from protocol import HEDGE_HEADER, PLAN_HEADER, RESERVE_HEADER, ErrorCode, ResourceIntent
from sandbox import fit_timeout
from tools import ToolRegistry

if TYPE_CHECKING:  # the pipeline imports this module; at run time it only needs the shape
    from gateway.pipeline import RequestContext


@dataclass(frozen=True)
class TimeGrant:
    """How long a call may run (None: the tool's own timeout), and how much earlier than the
    run's deadline its sandbox must answer so a kill still answers in time (None: as is)."""

    granted_ms: int | None
    kill_margin_ms: int | None = None
    hedge: HedgePlan | None = None  # ATBA's wait-or-hedge choice (None: not hedgeable)


META_PLAN_KEY = "conclave/plan"
META_RESERVE_KEY = "conclave/reserve_ms"
META_HEDGE_KEY = "conclave/hedge"
PROBE_GRACE_MS = 2_000  # a probe's lease outlives its grant by the kill and the reply
_DEFAULT_TIMEOUT_MS = ResourceIntent().timeout_ms


@dataclass(frozen=True)
class PlanBounds:
    """How long a plan may be (names) and how long each of its names (characters)."""

    max_names: int = 64
    max_name_chars: int = 64  # a served tool name's own limit (DESIGN.md, "MCP")

    def check(self, names: Sized, where: str) -> None:
        if len(names) > self.max_names:
            raise _plan_refused(where, f"at most {self.max_names} names, got {len(names)}")

    def check_text(self, raw: str, where: str) -> None:
        """A comma-separated plan, refused by its length before it is split."""
        if len(raw) > self.max_names * (self.max_name_chars + 1):
            raise _plan_refused(
                where, f"at most {self.max_names} names of {self.max_name_chars} characters"
            )

    def names(self, raw: Iterable[object], where: str) -> list[str]:
        plan = [str(name) if not isinstance(name, str) else name.strip() for name in raw]
        plan = [name for name in plan if name]
        self.check(plan, where)
        for name in plan:
            if len(name) > self.max_name_chars:
                raise _plan_refused(
                    where, f"each name at most {self.max_name_chars} characters, got {len(name)}"
                )
        return plan


def _plan_refused(where: str, limit: str) -> GatewayError:
    return GatewayError.of(
        ErrorCode.INVALID_REQUEST,
        f"{where} is longer than the gateway takes ({limit}): plan only the next calls",
        param_hints={where: limit},
    )


def _plan_of(ctx: RequestContext, bounds: PlanBounds) -> tuple[list[str], int]:
    """(planned tool names, reserve ms) from headers, body or MCP `_meta`, in that order;
    each source bounded before its names are looked at."""
    plan: list[str] = []
    reserve: int | None = None
    header_plan = ctx.headers.get(PLAN_HEADER.lower())
    if header_plan is not None:
        bounds.check_text(header_plan, PLAN_HEADER)
        plan = bounds.names(header_plan.split(","), PLAN_HEADER)
    header_reserve = ctx.headers.get(RESERVE_HEADER.lower())
    if header_reserve is not None:
        reserve = _reserve_ms(header_reserve, RESERVE_HEADER)
    if ctx.budget is not None:
        if not plan:
            bounds.check(ctx.budget.plan, "budget.plan")
            plan = bounds.names(ctx.budget.plan, "budget.plan")
        reserve = reserve if reserve is not None else ctx.budget.reserve_ms
    meta: Mapping[str, Any] = ctx.meta or {}
    if not plan:
        found = meta.get(META_PLAN_KEY)
        where = f"_meta.{META_PLAN_KEY}"
        if isinstance(found, list):
            bounds.check(found, where)
            plan = bounds.names(found, where)
        elif isinstance(found, str):
            bounds.check_text(found, where)
            plan = bounds.names(found.split(","), where)
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
        plan_bounds: PlanBounds | None = None,
        hedges: HedgeBudget | None = None,
        hedge_quantile: float = DEFAULT_QUANTILE,
    ) -> None:
        self.window = window
        self.hedges = hedges  # None: hedging is off
        self.hedge_quantile = hedge_quantile
        self.breaker = breaker
        self.registry = registry
        self.margin_ms = margin_ms
        self.min_grant_ms = min_grant_ms
        self.plan_bounds = plan_bounds or PlanBounds()

    def _declared_ms(self, tool: str) -> int:
        registered = self.registry.get(tool)
        return registered.spec.intent.timeout_ms if registered else _DEFAULT_TIMEOUT_MS

    def _ceiling_ms(self, ctx: RequestContext) -> int:
        assert ctx.tool is not None
        asked = ctx.limits.timeout_ms if ctx.limits else None
        return fit_timeout(ctx.tool.spec.intent.timeout_ms, asked, None)

    def reads(self, ctx: RequestContext) -> CallReads:
        """The breaker and, under a deadline, the windows of the call's chain and its kill
        lateness: read by the admission script, in the same round trip as the rate limit."""
        if ctx.tool is None:
            return CallReads()  # state operations and listings have no time budget
        tool = ctx.tool.name
        plan = _plan_of(ctx, self.plan_bounds)[0]  # bounded here, before any Redis work
        # The probe's lease covers the longest grant this call can get, and the reply.
        probe_ttl_ms = self._ceiling_ms(ctx) + PROBE_GRACE_MS
        if ctx.tool_context is None or ctx.tool_context.deadline_ms is None:
            # A hedgeable call weighs its hedge on the tool's window, deadline or not.
            alone: tuple[str, ...] = (tool,) if self._hedgeable(ctx) else ()
            return CallReads(tool, probe_ttl_ms, alone, self.window.window_ms)
        chain = planned_chain(tool, plan)
        windows = tuple(dict.fromkeys((*chain, kill_overshoot_of(tool))))
        return CallReads(tool, probe_ttl_ms, windows, self.window.window_ms)

    async def allocate(self, ctx: RequestContext, admitted: AdmissionDecision) -> TimeGrant:
        if ctx.tool is None:
            return TimeGrant(None)
        tool = ctx.tool.name
        tenant = ctx.require_principal().tenant
        ceiling = self._ceiling_ms(ctx)
        deadline = ctx.tool_context.deadline_ms if ctx.tool_context else None
        remaining = None if deadline is None else deadline - time.time() * 1000
        if not admitted.breaker_admitted:
            raise self.breaker.refusal(
                tenant, tool, admitted.breaker_wait_ms, admitted.breaker_state, remaining
            )
        if remaining is None:
            return await self._without_deadline(ctx, admitted, ceiling)
        plan, reserve = _plan_of(ctx, self.plan_bounds)
        chain = planned_chain(tool, plan)
        overshoot = kill_overshoot_of(tool)
        declared = {name: self._declared_ms(name) for name in chain} | {overshoot: 0}
        estimates = {
            name: self.window.summarize(name, admitted.windows.get(name, ()), ms)
            for name, ms in declared.items()
        }
        hedging = self._hedgeable(ctx)
        decided = plan_call(
            tool,
            chain,
            estimates,
            lateness=estimates[overshoot],
            remaining_ms=remaining,
            reserve_ms=reserve,
            max_ms=ceiling,
            reply_margin_ms=self.margin_ms,
            min_ms=self.min_grant_ms,
            hedging=hedging,
            hedge_quantile=self.hedge_quantile,
        )
        if decided.hedge is None:
            return TimeGrant(decided.granted_ms, kill_margin_ms=decided.kill_margin_ms)
        hedge = await self._affordable(ctx, decided.hedge)
        granted = decided.granted_ms if hedge.hedges else decided.unhedged_ms
        return TimeGrant(granted, kill_margin_ms=decided.kill_margin_ms, hedge=hedge)

    def _hedgeable(self, ctx: RequestContext) -> bool:
        """A call of an idempotent tool run in our sandboxes, with hedging on, whose caller
        did not say no."""
        if self.hedges is None or ctx.tool is None or not ctx.tool.spec.idempotent:
            return False
        if ctx.tool.entrypoint.startswith(ENTRYPOINT_PREFIX):
            return False  # a remote upstream's: no sandbox of ours to run a second attempt in
        if ctx.headers.get(HEDGE_HEADER.lower(), "").strip().lower() in ("off", "0", "false"):
            return False
        if ctx.budget is not None and not ctx.budget.hedge:
            return False
        return (ctx.meta or {}).get(META_HEDGE_KEY) is not False

    async def _affordable(self, ctx: RequestContext, hedge: HedgePlan) -> HedgePlan:
        """The plan, or waiting when the caller's identity holds no hedge now."""
        if not hedge.hedges or self.hedges is None:
            return hedge
        p = ctx.require_principal()
        if await self.hedges.holds(p.tenant, p.agent):
            return hedge
        return wait(f"the identity's hedge budget is spent ({hedge.reason})")

    async def _without_deadline(
        self, ctx: RequestContext, admitted: AdmissionDecision, ceiling: int
    ) -> TimeGrant:
        """The tool's timeout (or the caller's smaller one); a hedge at the tool's p95 when
        that timeout leaves a hedge its typical duration."""
        if not self._hedgeable(ctx):
            return TimeGrant(ceiling)
        assert ctx.tool is not None
        tool = ctx.tool.name
        this = self.window.summarize(tool, admitted.windows.get(tool, ()), ceiling)
        hedge = plan_fixed_hedge(
            this, ceiling, overhead_ms=self.margin_ms, quantile=self.hedge_quantile
        )
        return TimeGrant(ceiling, hedge=await self._affordable(ctx, hedge))
