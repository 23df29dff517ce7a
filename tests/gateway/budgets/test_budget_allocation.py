from __future__ import annotations

import time

import pytest
from redis.asyncio import Redis

import tools.builtin  # noqa: F401  (registers echo)
from gateway.budgets import (
    Admission,
    AtbaAllocator,
    CircuitBreaker,
    LatencyEstimate,
    LatencySample,
    LatencyWindow,
    allocate_budget,
    best_attempt,
    censored_quantile,
    finish_curve,
    kill_overshoot_of,
    planned_chain,
)
from gateway.gateway_error import GatewayError
from gateway.pipeline import AuthorizeStage, BudgetStage, RequestContext, ScopeStage
from protocol import Principal
from tools.registry import default_registry


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


@pytest.mark.anyio
async def test_a_late_kill_is_kept_back_once_per_chain_not_once_per_later_call(
    redis: Redis,
) -> None:
    """On a loaded host a few kills answer hundreds of ms late. The first call of a
    three-call chain must still get the room its later calls do not need (before, each
    later call kept the late kill's p95 back too, so the grant fell to the p50, where
    half the calls are killed), and a kill at that grant must still answer in time."""
    window, breaker = LatencyWindow(redis, min_samples=5), CircuitBreaker(redis, failures=100)
    for duration in range(30, 50):  # echo takes 30-49 ms
        await window.record("acme", "echo", float(duration))
    for late in [5.0] * 18 + [300.0] * 2:  # kills answer 5 ms late, a tenth of them 300 ms
        await window.record("acme", kill_overshoot_of("echo"), late)
    stage = BudgetStage(
        Admission(redis, rate_per_s=100.0, burst=100),
        AtbaAllocator(window, breaker, default_registry, margin_ms=10),
    )
    deadline = int(time.time() * 1000) + 600
    headers = {"x-conclave-deadline": str(deadline), "x-conclave-plan": "echo,echo,echo"}
    ctx = RequestContext("http", "test", headers, tool_name="echo")
    ctx.principal = Principal(tenant="acme", agent="w", scopes=("tool:*",), expires_at=0,
                              token_id="jti-1")  # fmt: skip
    await AuthorizeStage(default_registry)(ctx)
    await ScopeStage()(ctx)
    decided_from = time.time() * 1000
    await stage(ctx)
    assert ctx.granted_ms is not None and ctx.kill_margin_ms == 10 + 300
    # At least ~600 - 310 (this call's late kill) - 2 x (p25 35 ms + 15 ms of overhead).
    assert ctx.granted_ms >= 150
    # Counted from when it was decided, a kill at the grant answers in time (a call that
    # starts later is stopped by the sandbox's deadline, the run's less the kill margin).
    assert decided_from + ctx.granted_ms + ctx.kill_margin_ms <= deadline
