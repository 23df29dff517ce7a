"""The chance that a chain of calls finishes by its deadline, and the grant and hedge that make
it largest. Pure functions, no I/O; used by `call_plan` for a call under a deadline.

Time left is cut into `BINS` equal steps. For each call still planned, each tool's
Kaplan-Meier curve (`LatencyEstimate.finish_probability`, F) gives the chance that an
attempt finishes in each step. With `V_j(r)` the chance that calls j..n all finish within r,
`V_{n+1} = 1` and

    V_j(r) = max over grants g of  sum_{t < g} P(finish in step t) V_{j+1}(r - t - c)
                                   + (1 - F(g)) V_j(r - g - k)

where c is a call's overhead (request and reply) and k a kill's (its lateness and the retry's
overhead): an attempt that finishes hands what is left to the next call; one killed at its
grant is retried from what is left. So the grant of each call is weighed against what the
calls after it need, not only against this call's own chance (a grant that maximises the
chance that *this* call finishes starves the rest of the chain once the call runs long).

A hedge at h (a second attempt from h, `hedge_rule`) changes this call's curve to that of
the faster of two attempts: P(neither finished by t) = (1 - F(t)) (1 - F(t - h - s)), s the
hedge's start. It is worth a hedge when it raises V by at least `worth` per hedge spent
(a hedge is spent only when the first attempt is still running at h, 1 - F(h) of the time):
the identity's budget holds a few hedges, so they go where they buy the most.

The cost is `BINS` squared per planned call (a few ms for a chain of six).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from gateway.budgets.latency_window import LatencyEstimate

BINS = 48  # steps the time left is cut into
# Grants whose chances differ by less than this are equal: of those the longest is granted, as
# it costs the chain nothing and covers a tail the window has not seen.
TIE = 1e-6
# Where along the tool's curve a hedge may start.
HEDGE_QUANTILES = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


@dataclass(frozen=True)
class ChainChoice:
    grant_ms: float
    finish: float  # P(the chain finishes) with this grant (and hedge), as estimated
    hedge_after_ms: float | None = None
    finish_waiting: float = 0.0  # the same, the best grant without a hedge
    hedge_spend: float = 0.0  # P(the hedge starts): how much of a hedge it costs
    waiting_grant_ms: float = 0.0  # the best grant without a hedge


def _steps(this: LatencyEstimate, step: float) -> list[float]:
    """P(an attempt finishes in step t), t = 0..BINS-1 (the rest: not within the horizon)."""
    cumulative = [this.finish_probability((t + 1) * step) for t in range(BINS)]
    return [cumulative[0], *(b - a for a, b in pairwise(cumulative))]


def _best_over_grants(
    finish_in: list[float],
    after: list[float],
    own: list[float],
    r: int,
    call: int,
    kill: int,
) -> tuple[float, int]:
    """(best value, its grant in steps) for an attempt with r steps left."""
    best, best_g = 0.0, 1
    reached, finished = 0.0, 0.0
    for g in range(1, r + 1):
        t = g - 1
        left = r - t - call
        finished += finish_in[t]
        reached += finish_in[t] * (after[left] if left >= 0 else 0.0)
        retry = r - g - kill
        value = reached + (1.0 - finished) * (own[retry] if retry >= 0 else 0.0)
        if value >= best - TIE:  # of equal chances the longer grant: it costs nothing
            best, best_g = max(best, value), g
    return best, best_g


def _values(finish_in: list[float], after: list[float], call: int, kill: int) -> list[float]:
    """V_j over r = 0..BINS-1, from V_{j+1} (`after`)."""
    own: list[float] = []
    for r in range(BINS):
        own.append(_best_over_grants(finish_in, after, own, r, call, kill)[0])
    return own


def _hedged(finish_in: list[float], h: int, start: int) -> list[float]:
    """The per-step curve of the faster of an attempt and its hedge started at step h."""
    unfinished = []
    left = 1.0
    for p in finish_in:
        left -= p
        unfinished.append(max(0.0, left))
    out: list[float] = []
    before = 1.0
    for t in range(BINS):
        second = t - h - start
        both = unfinished[t] * (unfinished[second] if second >= 0 else 1.0)
        out.append(max(0.0, before - both))
        before = both
    return out


def best_choice(
    chain: Sequence[LatencyEstimate],
    *,
    room_ms: float,
    call_ms: float,
    kill_ms: float,
    end_ms: float,
    hedge_start_ms: float,
    hedging: bool,
    worth: float,
) -> ChainChoice:
    """The grant (and hedge) for `chain[0]` most likely to see the whole chain finish within
    `room_ms`; `call_ms` is what each later call costs beyond its tool's time, `kill_ms` what a
    kill costs before the retry runs, `end_ms` what the last answer must leave beyond
    `call_ms` (an answer's slow tail, so a chain that finishes finishes in time)."""
    step = max(1.0, room_ms / BINS)
    call = round(call_ms / step)
    kill = max(1, round(kill_ms / step))
    end = min(BINS, max(0, round(end_ms / step)))
    after = [0.0] * end + [1.0] * (BINS - end)
    for later in reversed(chain[1:]):
        after = _values(_steps(later, step), after, call, kill)
    first = _steps(chain[0], step)
    own = _values(first, after, call, kill)
    r = BINS - 1
    waiting, g = _best_over_grants(first, after, own, r, call, kill)
    choice = ChainChoice(g * step, waiting, finish_waiting=waiting, waiting_grant_ms=g * step)
    if not hedging or not chain[0].observed:
        return choice
    start = round(hedge_start_ms / step)
    best_worth = worth
    for q in HEDGE_QUANTILES:
        h = int(chain[0].quantile(q) / step)
        if h <= 0 or h >= r:
            continue
        spend = 1.0 - chain[0].finish_probability(h * step)
        value, hg = _best_over_grants(_hedged(first, h, start), after, own, r, call, kill)
        if spend > 0 and hg > h and (value - waiting) / spend > best_worth:
            best_worth = (value - waiting) / spend
            choice = ChainChoice(hg * step, value, h * step, waiting, spend, g * step)
    return choice
