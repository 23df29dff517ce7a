"""The hedge at a fixed point of the tool's window (its p95), for a call without a deadline,
and the hedge plan's shape. Pure functions, no I/O. A call under a deadline is weighed on
its whole chain instead (`chain_odds`, through `call_plan`): there the hedge point and the
grant are chosen together, from the same curves, by the chance that the chain finishes.

A hedge is a second attempt of a call of an idempotent tool, started in another sandbox of
the same identity once the first has run `after_ms` (the tool's p95 by default, from its
latency window) without answering; the first answer wins and the other attempt is cancelled.
Both attempts end where the call's grant ends, so a hedge never reaches past the deadline.

The choice compares the chance that the call finishes, from the same Kaplan-Meier curve the
grant comes from (`LatencyEstimate.finish_probability`, F):

- waiting: the grant `allocate_budget` made from the room the plan leaves, cut into k
  attempts, one after another (a killed attempt is retried): `1 - (1 - F(g))^k`;
- hedging: one attempt given the whole room R, and a hedge at h that has R - h - overhead
  to finish in: `1 - (1 - F(R)) (1 - F(R - h - overhead))`.

Waiting wins only when it is clearly more likely to finish (by `MIN_GAIN`: the curve is an
estimate): otherwise the call hedges, as a hedge starts only for the slow tail of calls
(those past p95: one in twenty) and cuts that tail short, which leaves the rest of the chain
more time even where both finish within the grant. A hedge needs room: it must have at least
the tool's p50 to run (a hedge that cannot finish typically only costs), and a hedge point
no sooner than a second attempt takes to start (`HEDGE_START_MS`). No hedge without
an observed window (no p95 to start it at, no curve to weigh it), for a tool not declared
idempotent, for a caller that said `hedge: false`, or when the identity's hedge budget is
spent (`HedgeBudget`).
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.budgets.grant_rule import MIN_GAIN, Allocation
from gateway.budgets.latency_window import LatencyEstimate

DEFAULT_QUANTILE = 0.95
HEDGE_START_MS = 5.0  # from the hedge point to the second attempt running (a warm sandbox)


@dataclass(frozen=True)
class HedgePlan:
    """What ATBA decided for one call: hedge after `after_ms` (None: wait), with the grant the
    call then gets, the chances it weighed, and why (for the audit and the trace)."""

    after_ms: int | None
    reason: str
    granted_ms: int | None = None  # the call's grant when hedging (the whole room)
    finish_wait: float = 0.0  # P(the call finishes) waiting: k attempts in turn
    finish_hedged: float = 0.0  # P(the call finishes) with the hedge

    @property
    def hedges(self) -> bool:
        return self.after_ms is not None


def wait(reason: str) -> HedgePlan:
    return HedgePlan(None, reason)


def plan_hedge(
    this: LatencyEstimate,
    allocation: Allocation,
    *,
    room_ms: float,
    max_ms: int,
    overhead_ms: float,
    quantile: float = DEFAULT_QUANTILE,
) -> HedgePlan:
    """Hedge or wait, for a call whose waiting grant is `allocation` and whose whole room
    (what the rest of its plan leaves it, already clamped to what it may have) is `room_ms`."""
    if not this.observed:
        return wait(f"fewer than the samples needed for a p{quantile * 100:.0f}")
    after = this.quantile(quantile)
    hedged_room = min(room_ms, float(max_ms))
    hedge_left = hedged_room - after - overhead_ms
    p50 = this.quantile(0.5)
    if after < HEDGE_START_MS:
        # The tool answers before a second attempt could even start: a hedge would only
        # double the call (and the race's own machinery would cost every call of it).
        return wait(
            f"the tool's p{quantile * 100:.0f} ({after:.1f} ms) is shorter than a hedge takes"
            f" to start ({HEDGE_START_MS:g} ms)"
        )
    if hedge_left < p50:
        return HedgePlan(
            None,
            f"no room: a hedge at {after:.0f} ms would have {max(0.0, hedge_left):.0f} ms,"
            f" less than the tool's p50 ({p50:.0f} ms)",
        )
    finish = this.finish_probability
    waiting = 1.0 - (1.0 - finish(allocation.granted_ms)) ** allocation.attempts
    hedged = 1.0 - (1.0 - finish(hedged_room)) * (1.0 - finish(hedge_left))
    if hedged + MIN_GAIN < waiting:
        return HedgePlan(
            None,
            f"waiting is more likely to finish ({waiting:.3f} vs {hedged:.3f} hedged)",
            finish_wait=waiting,
            finish_hedged=hedged,
        )
    return HedgePlan(
        int(after),
        f"hedge at p{quantile * 100:.0f} ({after:.0f} ms): {hedged:.3f} vs {waiting:.3f} waiting",
        granted_ms=max(1, int(hedged_room)),
        finish_wait=waiting,
        finish_hedged=hedged,
    )


def plan_fixed_hedge(
    this: LatencyEstimate, timeout_ms: int, *, overhead_ms: float, quantile: float
) -> HedgePlan:
    """Hedge or wait for a call without a deadline: one attempt, its timeout its room (the
    caller, not ATBA, decides on retries)."""
    single = Allocation(timeout_ms, timeout_ms, float(timeout_ms))
    return plan_hedge(
        this, single, room_ms=timeout_ms, max_ms=timeout_ms, overhead_ms=overhead_ms,
        quantile=quantile,
    )  # fmt: skip
