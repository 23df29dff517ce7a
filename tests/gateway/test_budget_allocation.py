from __future__ import annotations

import pytest

from gateway.budgets import LatencyEstimate, allocate_budget, planned_chain
from gateway.errors import GatewayError


def _observed(tool: str, p50: float, p95: float) -> LatencyEstimate:
    return LatencyEstimate(tool, p50, p95, 50, 0, "observed")


def test_share_follows_p95_across_the_plan() -> None:
    this, rest = _observed("this", 10, 100), _observed("rest", 150, 300)
    grant = allocate_budget(
        remaining_ms=300, reserve_ms=100, this=this, upcoming=[rest], max_ms=5_000
    )
    # (D - e - r) * q(i) / sum q = 200 * 100 / 400; the rest's p50 leaves this call 50 too
    assert grant.granted_ms == 50 and grant.available_ms == 200


def test_a_light_tool_gets_its_p95_when_the_rest_keeps_its_p50s() -> None:
    light, heavy = _observed("light", 10, 20), _observed("heavy", 30, 3_000)
    grant = allocate_budget(
        remaining_ms=200, reserve_ms=0, this=light, upcoming=[heavy], max_ms=900
    )
    assert grant.share_ms < 2 and grant.granted_ms == 20


def test_slack_beyond_the_rest_of_the_plans_p95_goes_to_this_call() -> None:
    fast, slow = _observed("fast", 10, 100), _observed("slow", 30, 300)
    grant = allocate_budget(
        remaining_ms=1_000, reserve_ms=200, this=fast, upcoming=[slow], max_ms=5_000
    )
    assert grant.share_ms == 200 and grant.granted_ms == 800 - 300


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
