"""ATBA under a deadline weighs each call's grant and hedge on the whole chain (pure)."""

from __future__ import annotations

import random

import pytest

from gateway.budgets import (
    LatencyEstimate,
    LatencySample,
    allocate_budget,
    finish_curve,
    plan_call,
)
from gateway.gateway_error import GatewayError


def _estimate(tool: str, samples: list[LatencySample]) -> LatencyEstimate:
    curve = finish_curve(samples)
    longest = max(s.duration_ms for s in samples)
    p50 = next((d for d, f in curve if f >= 0.5), longest)
    p95 = next((d for d, f in curve if f >= 0.95), longest)
    censored = sum(s.censored for s in samples)
    return LatencyEstimate(tool, p50, p95, len(samples), censored, "observed", curve)


def _pareto(tool: str, median_ms: float, alpha: float) -> LatencyEstimate:
    rng = random.Random(3)
    scale = median_ms / 2 ** (1 / alpha)
    return _estimate(
        tool, [LatencySample(scale * rng.paretovariate(alpha), False) for _ in range(200)]
    )


def _steady(tool: str) -> LatencyEstimate:  # 30-49 ms, never longer
    return _estimate(tool, [LatencySample(30.0 + i % 20, False) for i in range(40)])


def _hang_prone(tool: str) -> LatencyEstimate:  # 40-79 ms, or (one in ten) never answers
    samples = [LatencySample(40.0 + i % 40, False) for i in range(180)]
    return _estimate(tool, samples + [LatencySample(400.0, True)] * 20)


LATENESS = _estimate("_kill", [LatencySample(5.0, False)] * 20)
ARGS = {"lateness": LATENESS, "reserve_ms": 0, "max_ms": 60_000, "reply_margin_ms": 10,
        "min_ms": 10}  # fmt: skip


def test_a_heavy_tailed_call_is_cut_short_to_leave_the_rest_of_the_chain_its_time() -> None:
    """The first of four calls is a heavy-tailed fetch: killed and retried early, so that a
    fetch that runs long does not take the time the three calls after it need."""
    windows = {"fetch": _pareto("fetch", 100, 1.3), "parse": _steady("parse")}
    chain = ["fetch", "parse", "parse", "parse"]
    plan = plan_call("fetch", chain, windows, remaining_ms=700, hedging=False, **ARGS)
    alone = allocate_budget(
        remaining_ms=700, reserve_ms=0, this=windows["fetch"],
        upcoming=[windows["parse"]] * 3, max_ms=60_000, margin_ms=15, overhead_ms=15,
    )  # fmt: skip
    assert plan.granted_ms < alone.granted_ms  # this call's own best chance took more
    assert plan.granted_ms >= windows["fetch"].p50_ms
    assert plan.granted_ms <= 700 - 3 * (49 + 15)  # the rest keep what they take at most


def test_a_chain_that_cannot_finish_in_time_can_be_refused_before_it_starts() -> None:
    windows = {"fetch": _pareto("fetch", 100, 1.3)}
    with pytest.raises(GatewayError) as refused:
        plan_call(
            "fetch", ["fetch"] * 6, windows, remaining_ms=300, hedging=False, hopeless=0.01, **ARGS
        )
    assert refused.value.error.code == "BUDGET_EXHAUSTED"
    assert refused.value.error.details["finish_chance"] < 0.01
    # The same call alone has the time: it is granted; and without the floor (the default)
    # the hopeless chain's call is granted too.
    assert plan_call("fetch", ["fetch"], windows, remaining_ms=300, hedging=False, hopeless=0.01,
                     **ARGS)  # fmt: skip
    assert plan_call("fetch", ["fetch"] * 6, windows, remaining_ms=300, hedging=False, **ARGS)


def test_a_hedge_goes_where_it_raises_the_chains_chance_and_nowhere_else() -> None:
    windows = {"hang": _hang_prone("hang"), "parse": _steady("parse")}
    chain = ["hang", "parse", "parse"]
    plan = plan_call("hang", chain, windows, remaining_ms=280, hedging=True, **ARGS)
    assert plan.hedge is not None and plan.hedge.after_ms is not None
    # Started once the call has run past nearly all the calls that answer: the hedge is
    # spent on the calls most likely hung (one in ten), and well inside the grant.
    assert windows["hang"].finish_probability(plan.hedge.after_ms) >= 0.75
    assert plan.hedge.after_ms + 79 <= plan.granted_ms  # room for the hedge to answer
    assert plan.hedge.finish_hedged > plan.hedge.finish_wait
    steady = plan_call("parse", ["parse"] * 3, windows, remaining_ms=400, hedging=True, **ARGS)
    # Nothing to gain on the curve: at most the insurance hedge past the tool's p95.
    assert steady.hedge is not None and "no hedge point raises" in steady.hedge.reason
    assert steady.hedge.after_ms is None or steady.hedge.after_ms >= windows["parse"].p95_ms
