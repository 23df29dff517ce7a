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
The estimates come from the process's `EstimateCache`: the script reads a window's members
only when the estimate held of it went stale, so a grant costs the same on a young gateway
and on one with full windows.
A half-open circuit's probe lease is taken in the script, before the grant is known: it
covers the longest grant the call can get.

A delegation (an A2A agent's SendMessage, `DelegatedCall`) is planned as a call under a
deadline: its own window (`a2a:<agent>`), the agent's timeout as its declared one, the same
share of what is left after the caller's reserve and the later planned calls, no breaker and
no hedge (a second agent task is not a retry the gateway may start). Without a deadline the
agent's timeout applies, as before.

The call's deadline, plan, reserve and hedging consent come read already (`TimeAsk`, read
once by the scope stage, `gateway.budgets.time_ask`); a plan the gateway does not take is
refused here, when a tool call's time is weighed, before the admission script reads a window
for it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from gateway.budgets.admission import AdmissionDecision, CallReads
from gateway.budgets.breaker import CircuitBreaker
from gateway.budgets.call_plan import plan_call
from gateway.budgets.estimate_cache import EstimateCache
from gateway.budgets.grant_rule import planned_chain
from gateway.budgets.hedge_budget import HedgeBudget, hedge_key, holds_a_hedge
from gateway.budgets.hedge_rule import DEFAULT_QUANTILE, HedgePlan, plan_fixed_hedge, wait
from gateway.budgets.latency_window import (
    LatencyEstimate,
    LatencyWindow,
    WindowRead,
    kill_overshoot_of,
)
from gateway.budgets.time_ask import DelegatedCall, TimedCall
from protocol import ResourceIntent
from tools import RegisteredTool, ToolRegistry
from tools.calls import RunsIn, fit_timeout


@dataclass(frozen=True)
class TimeGrant:
    """How long a call may run (None: the tool's own timeout), and how much earlier than the
    run's deadline its sandbox must answer so a kill still answers in time (None: as is)."""

    granted_ms: int | None
    kill_margin_ms: int | None = None
    hedge: HedgePlan | None = None  # ATBA's wait-or-hedge choice (None: not hedgeable)


PROBE_GRACE_MS = 2_000  # a probe's lease outlives its grant by the kill and the reply
_DEFAULT_TIMEOUT_MS = ResourceIntent().timeout_ms


class AtbaAllocator:
    def __init__(
        self,
        window: LatencyWindow,
        breaker: CircuitBreaker,
        registry: ToolRegistry,
        *,
        margin_ms: int = 10,
        min_grant_ms: int = 10,
        hedges: HedgeBudget | None = None,
        hedge_quantile: float = DEFAULT_QUANTILE,
    ) -> None:
        self.window = window
        self.estimates = EstimateCache(window)
        self.hedges = hedges  # None: hedging is off
        self.hedge_quantile = hedge_quantile
        self.breaker = breaker
        self.registry = registry
        self.margin_ms = margin_ms
        self.min_grant_ms = min_grant_ms

    def _declared_ms(self, tool: str) -> int:
        registered = self.registry.get(tool)
        return registered.spec.intent.timeout_ms if registered else _DEFAULT_TIMEOUT_MS

    def _ceiling_ms(self, tool: RegisteredTool, call: TimedCall) -> int:
        return fit_timeout(tool.spec.intent.timeout_ms, call.asked_ms, None)

    def reads(self, call: TimedCall) -> CallReads:
        """The breaker and, under a deadline, the windows of the call's chain and its kill
        lateness: read by the admission script, in the same round trip as the rate limit."""
        if call.tool is None:
            if call.delegation is not None and call.ask.deadline_ms is not None:
                return self._delegation_reads(call, call.delegation)
            return CallReads()  # state operations and listings have no time budget
        tool = call.tool.name
        plan = _plan(call)  # refused here, before any Redis work
        # The probe's lease covers the longest grant this call can get, and the reply.
        probe_ttl_ms = self._ceiling_ms(call.tool, call) + PROBE_GRACE_MS
        hedgeable = self._hedgeable(call)
        if call.ask.deadline_ms is None:
            # A hedgeable call weighs its hedge on the tool's window, deadline or not.
            windows: tuple[str, ...] = (tool,) if hedgeable else ()
        else:
            chain = planned_chain(tool, plan)
            windows = tuple(dict.fromkeys((*chain, kill_overshoot_of(tool))))
        p = call.principal
        held = tuple(self.estimates.ask(p.tenant, name) for name in windows)
        hedges = hedge_key(p.tenant, p.agent) if hedgeable else None
        return CallReads(tool, probe_ttl_ms, windows, self.window.window_ms, held, hedges)

    async def allocate(self, call: TimedCall, admitted: AdmissionDecision) -> TimeGrant:
        if call.tool is None:
            if call.delegation is not None and call.ask.deadline_ms is not None:
                return self._delegation_grant(call, call.delegation, admitted)
            return TimeGrant(None)
        tool = call.tool.name
        tenant = call.principal.tenant
        ceiling = self._ceiling_ms(call.tool, call)
        deadline = call.ask.deadline_ms
        remaining = None if deadline is None else deadline - time.time() * 1000
        if not admitted.breaker_admitted:
            raise self.breaker.refusal(
                tenant, tool, admitted.breaker_wait_ms, admitted.breaker_state, remaining
            )
        if remaining is None:
            return await self._without_deadline(call, call.tool, admitted, ceiling)
        chain = planned_chain(tool, _plan(call))
        reserve = call.ask.reserve_ms
        overshoot = kill_overshoot_of(tool)
        declared = {name: self._declared_ms(name) for name in chain} | {overshoot: 0}
        estimates = {
            name: self._estimate(tenant, name, admitted, ms) for name, ms in declared.items()
        }
        hedging = self._hedgeable(call)
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
        hedge = self._affordable(decided.hedge, admitted)
        granted = decided.granted_ms if hedge.hedges else decided.unhedged_ms
        return TimeGrant(granted, kill_margin_ms=decided.kill_margin_ms, hedge=hedge)

    def _delegation_reads(self, call: TimedCall, delegation: DelegatedCall) -> CallReads:
        """The windows of the delegation's chain and its lateness (no breaker, no hedge)."""
        chain = planned_chain(delegation.window, _plan(call))
        windows = tuple(dict.fromkeys((*chain, kill_overshoot_of(delegation.window))))
        held = tuple(self.estimates.ask(call.principal.tenant, name) for name in windows)
        return CallReads(None, 0, windows, self.window.window_ms, held)

    def _delegation_grant(
        self, call: TimedCall, delegation: DelegatedCall, admitted: AdmissionDecision
    ) -> TimeGrant:
        """The delegation's share of the time left, as a tool call's would be (`plan_call`)."""
        assert call.ask.deadline_ms is not None  # asked only under a deadline
        name, tenant = delegation.window, call.principal.tenant
        chain = planned_chain(name, _plan(call))
        overshoot = kill_overshoot_of(name)
        declared = {n: self._declared_ms(n) for n in chain}
        declared |= {name: delegation.timeout_ms, overshoot: 0}
        estimates = {n: self._estimate(tenant, n, admitted, ms) for n, ms in declared.items()}
        decided = plan_call(
            name,
            chain,
            estimates,
            lateness=estimates[overshoot],
            remaining_ms=call.ask.deadline_ms - time.time() * 1000,
            reserve_ms=call.ask.reserve_ms,
            max_ms=delegation.timeout_ms,
            reply_margin_ms=self.margin_ms,
            min_ms=self.min_grant_ms,
            hedging=False,
        )
        return TimeGrant(decided.granted_ms, kill_margin_ms=decided.kill_margin_ms)

    def _estimate(
        self, tenant: str, name: str, admitted: AdmissionDecision, declared_ms: int
    ) -> LatencyEstimate:
        read = admitted.windows.get(name, WindowRead(0, ()))
        return self.estimates.settle(tenant, name, read, declared_ms)

    def _hedgeable(self, call: TimedCall) -> bool:
        """A call of an idempotent tool run in our sandboxes, with hedging on, whose caller
        did not say no."""
        if self.hedges is None or call.tool is None or not call.tool.spec.idempotent:
            return False
        if call.tool.placement.runs_in is RunsIn.HTTP_UPSTREAM:
            return False  # a remote upstream's: no sandbox of ours to run a second attempt in
        return call.ask.hedge

    def _affordable(self, hedge: HedgePlan, admitted: AdmissionDecision) -> HedgePlan:
        """The plan, or waiting when the caller's identity held no hedge as admission read
        its bucket (a hedge is taken for real when it starts: `HedgeBudget.take`)."""
        if not hedge.hedges or holds_a_hedge(admitted.hedge_tokens):
            return hedge
        return wait(f"the identity's hedge budget is spent ({hedge.reason})")

    async def _without_deadline(
        self, call: TimedCall, tool: RegisteredTool, admitted: AdmissionDecision, ceiling: int
    ) -> TimeGrant:
        """The tool's timeout (or the caller's smaller one); a hedge at the tool's p95 when
        that timeout leaves a hedge its typical duration."""
        if not self._hedgeable(call):
            return TimeGrant(ceiling)
        this = self._estimate(call.principal.tenant, tool.name, admitted, ceiling)
        hedge = plan_fixed_hedge(
            this, ceiling, overhead_ms=self.margin_ms, quantile=self.hedge_quantile
        )
        return TimeGrant(ceiling, hedge=self._affordable(hedge, admitted))


def _plan(call: TimedCall) -> tuple[str, ...]:
    """The call's plan, or its refusal (a plan the gateway does not take)."""
    if call.ask.refusal is not None:
        raise call.ask.refusal
    return call.ask.plan
