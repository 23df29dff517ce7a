from __future__ import annotations

import pytest
from redis.asyncio import Redis

from gateway.budgets import LatencySample, LatencyWindow, censored_quantile

pytestmark = pytest.mark.anyio


def _observed(*values: float) -> list[LatencySample]:
    return [LatencySample(v, False) for v in values]


def test_quantiles_without_censoring_are_the_plain_order_statistics() -> None:
    samples = _observed(*range(1, 101))
    assert censored_quantile(samples, 0.50) == 50
    assert censored_quantile(samples, 0.95) == 95


def test_killed_calls_raise_the_estimate_instead_of_counting_as_fast() -> None:
    # 80 calls near 10 ms, 20 killed at 30 ms: their real durations are unknown but >= 30.
    samples = _observed(*([10.0] * 80)) + [LatencySample(30.0, True)] * 20
    naive = sorted(s.duration_ms for s in samples)[94]
    assert naive == 30.0  # the naive p95 pretends the killed calls ended at 30 ms
    # Kaplan-Meier cannot place the p95 below the censoring point: lower bound 30.
    assert censored_quantile(samples, 0.95) == 30.0
    assert censored_quantile(samples, 0.50) == 10.0


def test_censored_samples_below_observed_ones_shift_weight_upward() -> None:
    # A call killed at 5 ms says nothing about being fast: the median stays with the 20s.
    samples = [LatencySample(5.0, True)] * 4 + _observed(20.0, 20.0, 40.0, 40.0, 40.0)
    assert censored_quantile(samples, 0.50) == 40.0
    plain = sorted(s.duration_ms for s in samples)[4]
    assert plain == 20.0


async def test_declared_timeout_stands_in_until_enough_samples(redis: Redis) -> None:
    window = LatencyWindow(redis, min_samples=5)
    for ms in (10, 11, 12, 13):
        await window.record("acme", "slow_tool", ms)
    early = await window.estimate("acme", "slow_tool", 2_000)
    assert (early.source, early.p50_ms, early.p95_ms, early.samples) == ("declared", 2000, 2000, 4)
    await window.record("acme", "slow_tool", 14)
    learned = await window.estimate("acme", "slow_tool", 2_000)
    assert learned.source == "observed" and learned.p50_ms == 12 and learned.p95_ms == 14
    # Another tenant's calls of the tool are another window: it has learned nothing yet.
    other = await window.estimate("globex", "slow_tool", 2_000)
    assert (other.source, other.samples) == ("declared", 0)


async def test_window_is_bounded_by_count_and_by_age(redis: Redis) -> None:
    window = LatencyWindow(redis, window_s=10, max_samples=3, min_samples=1)
    now = 1_000_000
    for i, ms in enumerate((100, 200, 300, 400)):
        await window.record("acme", "t", ms, now_ms=now + i)
    kept = await window.samples("acme", "t", now_ms=now + 10)
    assert sorted(s.duration_ms for s in kept) == [200, 300, 400]
    # Eleven seconds later the old samples have aged out of the window.
    await window.record("acme", "t", 50, now_ms=now + 11_000)
    later = await window.samples("acme", "t", now_ms=now + 11_000)
    assert [s.duration_ms for s in later] == [50]


async def test_replicas_share_one_window(redis: Redis, redis_url: str) -> None:
    from gateway.redis_client import connect_redis

    other = connect_redis(redis_url)
    try:
        await LatencyWindow(redis, min_samples=1).record("acme", "shared", 42, censored=True)
        seen = await LatencyWindow(other, min_samples=1).estimate("acme", "shared", 1000)
    finally:
        await other.aclose()
    assert seen.samples == 1 and seen.censored == 1 and seen.p95_ms == 42
