"""ATBA's whole decision for one call under a deadline, from estimates already read: the
grant (`grant_rule`) and, for a hedgeable call, wait or hedge (`hedge_rule`). Pure, no I/O:
the allocator calls it with what the admission script read, and the budgets suite's offline
simulation (`conclave.bench.recovery.budgets_sim`) calls the same function on the same kind
of input.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from gateway.budgets.chain_odds import best_choice
from gateway.budgets.grant_rule import Allocation, allocate_budget
from gateway.budgets.hedge_rule import (
    DEFAULT_QUANTILE,
    HEDGE_START_MS,
    HedgePlan,
    plan_hedge,
    wait,
)
from gateway.budgets.latency_window import LatencyEstimate
from gateway.gateway_error import GatewayError
from protocol import ErrorCode
from tools.calls import kill_margin_ms

# A hedge must raise the chance that the chain finishes by this much per hedge spent: the
# identity's budget holds few, so they go to the calls where they buy the most.
HEDGE_WORTH = 0.1
NO_WINDOW = "no latency curve of the tool yet"
# Below this chance that the chain finishes in time, the call may be refused before it starts
# (its work would be wasted). Off by default: the chance counts a kill's lateness into every
# call's overhead, so on a loaded host it is pessimistic, and a budgets run there (load
# 20-60) with a 1% floor refused every chain at 800 ms that the fixed policies completed a
# fifth of.
HOPELESS = 0.0


@dataclass(frozen=True)
class CallPlan:
    granted_ms: int
    kill_margin_ms: int
    allocation: Allocation
    hedge: HedgePlan | None = None  # None: not hedgeable
    waiting_ms: int | None = None  # the grant should a planned hedge not be affordable

    @property
    def unhedged_ms(self) -> int:
        return self.granted_ms if self.waiting_ms is None else self.waiting_ms


def plan_call(
    tool: str,
    chain: Sequence[str],
    estimates: Mapping[str, LatencyEstimate],
    *,
    lateness: LatencyEstimate,
    remaining_ms: float,
    reserve_ms: float,
    max_ms: int,
    reply_margin_ms: int,
    min_ms: int,
    hedging: bool,
    hedge_quantile: float = DEFAULT_QUANTILE,
    hedge_worth: float = HEDGE_WORTH,
    hopeless: float = HOPELESS,
) -> CallPlan:
    """The grant for `tool`, the first of `chain` (its planned calls, this one first), and
    its hedge plan when `hedging`; raises `GatewayError(BUDGET_EXHAUSTED)` when it cannot fit.
    `lateness` is how late this tool's killed calls answered; `hedge_worth` how much a
    hedge must raise the chain's chance per hedge spent."""
    # Keep back a late kill's lateness (its p95, as measured here; 0 until it is known)
    # once, at the end of the chain, so this call killed at its grant still answers in
    # time (and per extra attempt of this call, each of which follows a kill). A later
    # call costs only the reply margin and a typical kill's lateness: keeping the p95
    # back per later call starved every grant to the p50 (and refused) on a loaded
    # host, where kills answer hundreds of ms late.
    margin = kill_margin_ms(reply_margin_ms, lateness.p95_ms)
    per_call = kill_margin_ms(reply_margin_ms, lateness.p50_ms)
    grant = allocate_budget(
        remaining_ms=remaining_ms,
        reserve_ms=reserve_ms,
        this=estimates[tool],
        upcoming=[estimates[name] for name in chain[1:]],
        max_ms=max_ms,
        margin_ms=margin,
        min_ms=min_ms,
        overhead_ms=per_call,
    )
    this = estimates[tool]
    if not this.observed:  # no curve to weigh grants on: the rule of thumb's grant
        return CallPlan(grant.granted_ms, margin, grant, wait(NO_WINDOW) if hedging else None)
    usable = remaining_ms - reserve_ms - margin
    choice = best_choice(
        [estimates[name] for name in chain],
        room_ms=remaining_ms - reserve_ms,
        call_ms=per_call,
        kill_ms=per_call + lateness.p50_ms,
        end_ms=margin - per_call,
        hedge_start_ms=HEDGE_START_MS,
        hedging=hedging,
        worth=hedge_worth,
    )
    if choice.finish < hopeless:
        raise _hopeless(tool, chain, choice.finish, remaining_ms)

    def clamped(ms: float) -> int:
        # Within what this call may use (`usable`: its kill still answers in time). Not within
        # `grant.room_ms` (what the rest of the plan leaves at its low end): at a tight deadline
        # that clamp killed a first call the chain's odds said to let finish (SIMULATION, 100
        # chains: heavy-tail completion at 560 ms 42% with it, 49% without).
        return max(1, int(min(max(ms, float(min_ms)), float(max_ms), usable)))

    granted = clamped(choice.grant_ms)
    if not hedging:
        return CallPlan(granted, margin, grant)
    if choice.hedge_after_ms is None:
        # No hedge point pays on the curve; past its p95 the curve has few samples to say,
        # and a hedge there (the rule) is rarely spent: insurance for a tail the
        # window has not seen, when the grant leaves it room.
        granted_plan = CallPlan(granted, margin, grant)
        tail = plan_hedge(
            this,
            Allocation(granted, grant.available_ms, float(granted)),
            room_ms=granted,
            max_ms=granted,
            overhead_ms=per_call,
            quantile=hedge_quantile,
        )
        reason = f"no hedge point raises the chain's chance by {hedge_worth} per hedge spent"
        if tail.hedges:
            tail = replace(tail, reason=f"{reason}; {tail.reason}")
            return replace(granted_plan, hedge=tail)
        return replace(granted_plan, hedge=HedgePlan(None, reason, finish_wait=choice.finish))
    hedge = HedgePlan(
        int(choice.hedge_after_ms),
        f"hedge at {choice.hedge_after_ms:.0f} ms: the chain finishes {choice.finish:.3f} vs"
        f" {choice.finish_waiting:.3f} waiting, for {choice.hedge_spend:.2f} of a hedge",
        granted_ms=granted,
        finish_wait=choice.finish_waiting,
        finish_hedged=choice.finish,
    )
    return CallPlan(granted, margin, grant, hedge, clamped(choice.waiting_grant_ms))


def _hopeless(tool: str, chain: Sequence[str], finish: float, remaining_ms: float) -> GatewayError:
    return GatewayError.of(
        ErrorCode.BUDGET_EXHAUSTED,
        f"not started: the {len(chain)} planned calls from {tool!r} have a {100 * finish:.1f}%"
        f" chance to finish in the {max(0, int(remaining_ms))} ms left, from their latency"
        " windows; replan with fewer or faster calls, or a later deadline",
        details={
            "tool": tool,
            "remaining_ms": max(0, int(remaining_ms)),
            "planned": len(chain),
            "finish_chance": round(finish, 4),
        },
    )
