"""ATBA: how much of a run's remaining time one call may use. Pure functions, no I/O.

What this module decides for a call under a deadline is the refusal (below) and the call's
room; once the tool's window has a curve, the grant within that room is the one that makes
the *chain* most likely to finish (`chain_odds`, through `call_plan`), and the rule of thumb
below stands only while the window has too few samples.

For call i with planned calls i..n, deadline D, elapsed e and reserve r, the first design wrote
`t_i = clamp(min_i, max_i, (D - e - r) * q(i) / sum_{j>=i} q(j))`. A p95-proportional share
starves mid-chain calls (it kills calls that would have finished and leaves time unused at
the end), so the grant here is what maximises the chance that the *chain* finishes:

- the rest of the plan keeps back what it needs at its low end: each later call's p25 (from
  its latency window) plus a per-call overhead; what is left, `room`, is this call's;
- `room` is cut into k equal attempts, k = 1..4 chosen to maximise the chance that one of
  them finishes, from the tool's Kaplan-Meier curve: with a heavy tail, a call that runs
  long is better killed and retried (its retry gets a fresh draw) than waited for;
- clamped below by the tool's observed p50 (granting less than the typical duration only
  wastes the call) and `min_ms`, above by `max_ms` (the declared timeout or the caller's
  smaller request) and by what is left, `D - e - r` minus a margin for the kill and the
  reply, so a call killed at its grant still answers before the deadline.

When `D - e - r` is below the tool's observed p50 the call is refused before it starts
(`BUDGET_EXHAUSTED`; `DEADLINE_EXCEEDED` once the deadline has passed). Where kills hide the
p50 (most recent calls hung and were killed), the longest a call was seen to finish in
stands in (`LatencyEstimate.quantile`), so a tool that answers again gets its calls. A tool
with no observed samples, or none finished, is never refused on a guess: it gets all of
`room`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gateway.budgets.latency_window import LatencyEstimate
from gateway.gateway_error import GatewayError
from protocol import ErrorCode

# The later calls keep back this quantile of their latency each; the current call may be
# cut into at most this many attempts, and into more only for a clear gain in the chance
# that one finishes (the curve is an estimate from a window of samples).
REST_QUANTILE = 0.25
MAX_ATTEMPTS = 4
MIN_GAIN = 0.02


@dataclass(frozen=True)
class Allocation:
    granted_ms: int
    available_ms: int  # D - e - r when the grant was made
    share_ms: float  # this attempt's share of the room before clamping, for audit and tests
    attempts: int = 1  # how many attempts the room was planned for
    room_ms: float = 0.0  # what the rest of the plan left this call, for a hedged single attempt


def planned_chain(tool: str, plan: Sequence[str]) -> list[str]:
    """The calls still to come, this one first (a plan that does not start with it gets it)."""
    chain = list(plan)
    if not chain or chain[0] != tool:
        chain.insert(0, tool)
    return chain


def allocate_budget(
    *,
    remaining_ms: float,
    reserve_ms: float,
    this: LatencyEstimate,
    upcoming: Sequence[LatencyEstimate] = (),
    max_ms: int,
    margin_ms: int = 0,
    min_ms: int = 1,
    overhead_ms: float | None = None,
) -> Allocation:
    """The grant for one call; raises `GatewayError(BUDGET_EXHAUSTED)` when it cannot fit.

    `remaining_ms` is D - e (deadline minus now), `upcoming` the planned calls after this
    one, `max_ms` the most this call may get (the declared timeout or the caller's request),
    `min_ms` the least worth granting at all, `overhead_ms` what each later call costs
    beyond the tool's own time (the request and the reply; `margin_ms` unless given). An
    extra attempt of this call follows a kill, so it costs `margin_ms`, a late kill's.
    """
    available = remaining_ms - reserve_ms
    usable = available - margin_ms
    p50 = this.quantile(0.5) if this.observed else 0.0
    if usable <= 0 or available < p50:
        raise _exhausted(this, p50, available, remaining_ms, reserve_ms, margin_ms)
    overhead = float(margin_ms if overhead_ms is None else overhead_ms)
    rest_needs = sum(e.quantile(REST_QUANTILE) + overhead for e in upcoming if e.observed)
    room = usable - rest_needs
    share, attempts = best_attempt(this, room, float(margin_ms))
    granted = min(max(share, p50, float(min_ms)), float(max_ms), usable)
    return Allocation(max(1, int(granted)), int(available), share, attempts, room)


def best_attempt(this: LatencyEstimate, room: float, overhead: float) -> tuple[float, int]:
    """(grant per attempt, attempts): `room` cut into the number of equal attempts most
    likely to see one finish. Without a latency curve, or with no room, one attempt."""
    if not this.observed or room <= 0:
        return room, 1
    best, best_grant, best_k = -1.0, room, 1
    for k in range(1, MAX_ATTEMPTS + 1):
        grant = (room - (k - 1) * overhead) / k
        if grant <= 0:
            break
        finishes = 1.0 - (1.0 - this.finish_probability(grant)) ** k
        if finishes > best + MIN_GAIN:
            best, best_grant, best_k = finishes, grant, k
    return best_grant, best_k


def _exhausted(
    this: LatencyEstimate,
    p50: float,
    available: float,
    remaining_ms: float,
    reserve_ms: float,
    margin: int,
) -> GatewayError:
    if remaining_ms <= 0:
        return GatewayError.of(
            ErrorCode.DEADLINE_EXCEEDED,
            f"not started: the run's deadline passed {int(-remaining_ms)} ms ago",
            details={"tool": this.tool, "remaining_ms": int(remaining_ms)},
        )
    hint = f"{this.tool} typically takes {p50:.0f} ms (p50 of {this.samples} calls)"
    if available <= 0:
        hint = "the reserve for model turns uses all that is left"
    elif available - margin <= 0:
        hint = f"all of it is kept back ({margin} ms) so a kill still answers in time"
    return GatewayError.of(
        ErrorCode.BUDGET_EXHAUSTED,
        f"not started: {max(0, int(available))} ms left for {this.tool!r}, {hint};"
        " replan with fewer or faster calls, or a later deadline",
        details={
            "tool": this.tool,
            "available_ms": max(0, int(available)),
            "remaining_ms": max(0, int(remaining_ms)),
            "reserve_ms": int(reserve_ms),
            "margin_ms": margin,
            "p50_ms": p50,
            "samples": this.samples,
        },
    )
