"""ATBA's wait-or-hedge choice (pure) and the per-identity hedge budget (real Redis)."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from gateway.budgets import (
    CallFeedback,
    CircuitBreaker,
    HedgeBudget,
    LatencyEstimate,
    LatencySample,
    LatencyWindow,
    allocate_budget,
    finish_curve,
    plan_fixed_hedge,
    plan_hedge,
)

# A heavy tail: nineteen calls of 20-56 ms, one of 2 s (p50 38 ms, p95 56 ms).
DURATIONS = [20.0 + i for i in range(0, 38, 2)] + [2_000.0]


def _estimate(durations: list[float], tool: str = "t") -> LatencyEstimate:
    samples = [LatencySample(d, False) for d in durations]
    curve = finish_curve(samples)
    p50 = next(d for d, f in curve if f >= 0.5)
    p95 = next(d for d, f in curve if f >= 0.95)
    return LatencyEstimate(tool, p50, p95, len(samples), 0, "observed", curve)


def test_a_heavy_tailed_tool_with_room_hedges_at_its_p95() -> None:
    this = _estimate(DURATIONS)
    grant = allocate_budget(remaining_ms=1_000, reserve_ms=0, this=this, max_ms=60_000)
    plan = plan_hedge(this, grant, room_ms=grant.room_ms, max_ms=60_000, overhead_ms=10)
    assert plan.hedges and plan.after_ms == int(this.p95_ms)
    assert plan.granted_ms is not None and plan.granted_ms <= 1_000  # never past the room
    assert plan.finish_hedged >= plan.finish_wait


def test_no_hedge_without_a_window_or_without_room_for_a_typical_hedge() -> None:
    declared = LatencyEstimate("t", 5_000, 5_000, 2, 0, "declared")
    grant = allocate_budget(remaining_ms=1_000, reserve_ms=0, this=declared, max_ms=5_000)
    assert not plan_hedge(declared, grant, room_ms=1_000, max_ms=5_000, overhead_ms=10).hedges
    this = _estimate(DURATIONS)
    # 60 ms of room: a hedge at 56 ms would have none, less than the tool's p50.
    tight = allocate_budget(remaining_ms=60, reserve_ms=0, this=this, max_ms=60_000)
    plan = plan_hedge(this, tight, room_ms=60, max_ms=60_000, overhead_ms=10)
    assert not plan.hedges and "no room" in plan.reason


def test_a_tool_that_answers_before_a_hedge_could_start_is_never_hedged() -> None:
    # A sub-millisecond tool with a heavy tail: its p95 (0.9 ms) is sooner than a second
    # attempt can start, so a hedge there would only run every slow call twice.
    this = _estimate([0.1 + i / 100 for i in range(19)] + [40.0])
    plan = plan_fixed_hedge(this, 2_000, overhead_ms=10, quantile=0.95)
    assert not plan.hedges and "shorter than a hedge takes to start" in plan.reason


def test_a_call_without_a_deadline_hedges_when_its_timeout_leaves_room() -> None:
    this = _estimate(DURATIONS)
    assert plan_fixed_hedge(this, 60_000, overhead_ms=10, quantile=0.95).after_ms == 56
    assert not plan_fixed_hedge(this, 50, overhead_ms=10, quantile=0.95).hedges


@pytest.mark.anyio
async def test_an_identity_earns_its_share_of_hedges_by_its_calls(redis: Redis) -> None:
    budget = HedgeBudget(redis, share=0.05, cap=2)
    window = LatencyWindow(redis)
    feedback = CallFeedback(window, CircuitBreaker(redis), budget)

    async def calls(count: int) -> None:
        for _ in range(count):
            await feedback.learn(
                "acme", "t", None, wall_ms=5, granted_ms=100, declared_ms=100,
                stop_by_ms=None, answered_ms=0, agent="a1",
            )  # fmt: skip

    await calls(19)
    assert not await budget.holds("acme", "a1") and not await budget.take("acme", "a1")
    await calls(1)  # the twentieth call earns the first hedge
    assert await budget.holds("acme", "a1") and await budget.take("acme", "a1")
    assert not await budget.take("acme", "a1")
    assert await budget.counts("acme", "a1") == (20, 1)
    await calls(200)  # a long quiet stretch banks at most `cap` hedges
    taken = [await budget.take("acme", "a1") for _ in range(4)]
    assert taken == [True, True, False, False]
    assert not await budget.holds("acme", "a2")  # another agent earned nothing
