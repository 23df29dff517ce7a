from __future__ import annotations

import pytest

from gateway.budgets import (
    LatencyEstimate,
    LatencySample,
    allocate_budget,
    best_attempt,
    censored_quantile,
    finish_curve,
    planned_chain,
)
from gateway.gateway_error import GatewayError


def _observed(tool: str, p50: float, p95: float) -> LatencyEstimate:
    return LatencyEstimate(tool, p50, p95, 50, 0, "observed")


def _measured(tool: str, durations: list[float]) -> LatencyEstimate:
    """An estimate as the window gives it, from these finished calls."""
    samples = [LatencySample(d, False) for d in durations]
    curve = finish_curve(samples)
    p50, p95 = censored_quantile(samples, 0.5), censored_quantile(samples, 0.95)
    return LatencyEstimate(tool, p50, p95, len(samples), 0, "observed", curve)


STEADY = [40.0 + i for i in range(20)]  # 40..59 ms: a call that runs long is just slow
# Half the calls take 20 ms, the other half hang for 2 s: a call still running after 20 ms
# will hang, so killing it and starting again beats waiting.
HANGS = [20.0] * 10 + [2_000.0] * 10


def test_the_rest_of_the_plan_keeps_its_low_end_and_this_call_gets_the_room() -> None:
    this, rest = _measured("this", STEADY), _measured("rest", [100.0 + i for i in range(20)])
    grant = allocate_budget(
        remaining_ms=400, reserve_ms=50, this=this, upcoming=[rest, rest], max_ms=5_000,
        margin_ms=10,
    )  # fmt: skip
    # 350 available, 340 usable; each later call keeps its p25 (104 ms) and 10 ms overhead.
    assert grant.available_ms == 350 and grant.attempts == 1
    assert grant.granted_ms == 340 - 2 * (104 + 10)


def test_a_call_prone_to_hang_is_cut_into_attempts_when_there_is_room() -> None:
    hangs = _measured("hangs", HANGS)
    grant = allocate_budget(remaining_ms=130, reserve_ms=0, this=hangs, max_ms=5_000, margin_ms=10)
    # Four attempts of (120 - 3 * 10) / 4 = 22.5 ms: each finishes with 1/2, one of them 15/16.
    assert grant.attempts == 4 and grant.granted_ms == 22
    assert best_attempt(hangs, 25, 10) == (25, 1)  # no room for a second try that could finish
    steady = allocate_budget(remaining_ms=130, reserve_ms=0, this=_measured("s", STEADY),
                             max_ms=5_000, margin_ms=10)  # fmt: skip
    assert steady.attempts == 1 and steady.granted_ms == 120  # waiting is what finishes


def test_grant_is_clamped_to_p50_below_and_the_declared_timeout_above() -> None:
    this = _observed("t", 50, 60)
    upcoming = [_observed("u", 60, 10_000)]
    low = allocate_budget(remaining_ms=100, reserve_ms=0, this=this, upcoming=upcoming, max_ms=900)
    assert low.granted_ms == 50 and low.share_ms < 50
    high = allocate_budget(remaining_ms=100_000, reserve_ms=0, this=this, max_ms=900)
    assert high.granted_ms == 900


def test_never_grants_more_than_what_is_left() -> None:
    this = _observed("t", 50, 2_000)
    grant = allocate_budget(remaining_ms=120, reserve_ms=20, this=this, max_ms=5_000, margin_ms=10)
    assert grant.granted_ms == 90


def test_refused_when_what_is_left_is_below_the_p50() -> None:
    this = _observed("t", 300, 900)
    with pytest.raises(GatewayError) as refused:
        allocate_budget(remaining_ms=400, reserve_ms=150, this=this, max_ms=5_000)
    error = refused.value.error
    assert error.code == "BUDGET_EXHAUSTED" and error.action == "replan"
    assert error.details["available_ms"] == 250 and error.details["p50_ms"] == 300


def test_past_the_deadline_is_deadline_exceeded() -> None:
    with pytest.raises(GatewayError) as refused:
        allocate_budget(remaining_ms=-5, reserve_ms=0, this=_observed("t", 1, 2), max_ms=100)
    assert refused.value.error.code == "DEADLINE_EXCEEDED"
    assert refused.value.error.action == "abort"


def test_a_tool_without_samples_is_not_refused_on_its_declared_timeout() -> None:
    declared = LatencyEstimate("t", 30_000, 30_000, 0, 0, "declared")
    grant = allocate_budget(remaining_ms=500, reserve_ms=0, this=declared, max_ms=30_000)
    assert grant.granted_ms == 500


def test_the_plan_always_starts_with_this_call() -> None:
    assert planned_chain("a", ["b", "c"]) == ["a", "b", "c"]
    assert planned_chain("a", ["a", "b"]) == ["a", "b"]
    assert planned_chain("a", []) == ["a"]
