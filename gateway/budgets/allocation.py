"""ATBA: how much of a run's remaining time one call may use. Pure functions, no I/O.

For call i with planned calls i..n, deadline D, elapsed e and reserve r (DESIGN.md):

    t_i = clamp(min_i, max_i, (D - e - r) * q(i) / sum_{j>=i} q(j))

q is each tool's p95 (its declared timeout until the window has enough samples). Here
min_i is the tool's observed p50 (granting less than the typical duration only wastes the
call), max_i is the tool's declared timeout (or the caller's smaller request), and the grant
never exceeds what is left: `D - e - r` minus a small margin for the kill and the reply, so a
call killed at its grant still answers before the deadline.

When `D - e - r` is below the tool's observed p50 the call is refused before it starts
(`BUDGET_EXHAUSTED`; `DEADLINE_EXCEEDED` once the deadline has passed). A tool with no
observed samples is never refused on a guess: it gets what is left.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gateway.budgets.latency import LatencyEstimate
from gateway.errors import GatewayError
from protocol.serf import ErrorCode


@dataclass(frozen=True)
class Allocation:
    granted_ms: int
    available_ms: int  # D - e - r when the grant was made
    share_ms: float  # the formula's unclamped share, for the audit and the tests


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
) -> Allocation:
    """The grant for one call; raises `GatewayError(BUDGET_EXHAUSTED)` when it cannot fit.

    `remaining_ms` is D - e (deadline minus now), `upcoming` the planned calls after this
    one, `max_ms` the most this call may get (the declared timeout or the caller's request),
    `min_ms` the least worth granting at all (a call also pays its executor's overhead).
    """
    available = remaining_ms - reserve_ms
    usable = available - margin_ms
    p50 = this.p50_ms if this.observed else 0.0
    if usable <= 0 or available < p50:
        raise _exhausted(this, available, remaining_ms, reserve_ms, margin_ms)
    weights = [max(this.p95_ms, 1.0)] + [max(e.p95_ms, 1.0) for e in upcoming]
    share = usable * weights[0] / sum(weights)
    # Slack beyond what the rest of the plan needs at its p95 is this call's too: with a
    # loose deadline nothing is killed early; with a tight one the share decides.
    slack = usable - sum(weights[1:])
    # And a call gets its own p95 when the rest of the plan can still have its p50s: a
    # light-tailed tool next to heavy-tailed ones is not starved by their huge p95s.
    rest_p50 = sum(e.p50_ms if e.observed else 0.0 for e in upcoming)
    affordable = min(this.p95_ms, usable - rest_p50) if this.observed else 0.0
    granted = min(max(share, slack, affordable, p50, float(min_ms)), float(max_ms), usable)
    return Allocation(max(1, int(granted)), int(available), share)


def _exhausted(
    this: LatencyEstimate, available: float, remaining_ms: float, reserve_ms: float, margin: int
) -> GatewayError:
    if remaining_ms <= 0:
        return GatewayError.of(
            ErrorCode.DEADLINE_EXCEEDED,
            f"not started: the run's deadline passed {int(-remaining_ms)} ms ago",
            details={"tool": this.tool, "remaining_ms": int(remaining_ms)},
        )
    hint = f"{this.tool} typically takes {this.p50_ms:.0f} ms (p50 of {this.samples} calls)"
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
            "p50_ms": this.p50_ms,
            "samples": this.samples,
        },
    )
