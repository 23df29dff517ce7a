from __future__ import annotations

import time

import httpx
import pytest
from redis.asyncio import Redis

from gateway.assembly import create_app
from gateway.budgets import (
    Admission,
    CallReads,
    EstimateCache,
    LatencyEstimate,
    LatencySample,
    LatencyWindow,
    WindowRead,
    censored_quantile,
    version_key,
    window_key,
)
from gateway.config import Settings
from gateway.identity.tokens import issue_token

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
    from gateway.redis_io import connect_redis

    other = connect_redis(redis_url)
    try:
        await LatencyWindow(redis, min_samples=1).record("acme", "shared", 42, censored=True)
        seen = await LatencyWindow(other, min_samples=1).estimate("acme", "shared", 1000)
    finally:
        await other.aclose()
    assert seen.samples == 1 and seen.censored == 1 and seen.p95_ms == 42


async def test_after_hung_calls_a_budgeted_call_still_runs_once_the_tool_answers(
    settings: Settings, redis: Redis
) -> None:
    """Four calls that hung were killed at 500 ms: they took at least 500 ms, and no call
    has finished since. A budgeted call with 400 ms left must still run (before, the kills'
    lower bound stood in for the p50 and every budgeted call under 500 ms was refused
    BUDGET_EXHAUSTED, so no call could finish to show the tool answers again)."""
    hanging = settings.model_copy(
        update={"tool_modules": ("tools.builtin", "tools.harness.faults"),
                "latency_min_samples": 3}
    )  # fmt: skip
    app = create_app(hanging)
    token = issue_token(hanging, tenant="acme", agent="w", scopes=["tool:*"])
    headers = {"Authorization": f"Bearer {token}"}
    url = "/v1/tools/heavy_tailed_sleep/call"
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://gateway", headers=headers, timeout=10
        ) as http:
            hang = {"distribution": "fixed", "median_ms": 60_000}
            for _ in range(4):
                killed = await http.post(
                    url, json={"arguments": hang, "limits": {"timeout_ms": 500}}
                )
                assert killed.json()["code"] == "TOOL_TIMEOUT", killed.text
            window = (await http.get("/v1/tools/heavy_tailed_sleep/latency")).json()
            assert (window["samples"], window["censored"]) == (4, 4)
            deadline = int(time.time() * 1000) + 400
            answered = await http.post(
                url,
                json={"arguments": {"distribution": "fixed", "median_ms": 20}},
                headers={"X-Conclave-Deadline": str(deadline)},
            )
            assert answered.status_code == 200, answered.text
            assert answered.json()["result"] == 20
            assert time.time() * 1000 <= deadline


async def test_a_held_estimate_is_made_again_once_its_window_moved_a_tenth(redis: Redis) -> None:
    window = LatencyWindow(redis, min_samples=5)
    admission = Admission(redis, rate_per_s=1e6, burst=10**6)
    held = EstimateCache(window, refresh_ms=60_000)

    async def grant_estimate() -> LatencyEstimate:
        reads = CallReads(None, 0, ("t",), window.window_ms, (held.ask("acme", "t"),))
        decision = await admission.admit("acme", "a", 0, "t", reads)
        return held.settle("acme", "t", decision.windows["t"], 2_000)

    assert (await grant_estimate()).source == "declared"  # no window yet: the declared 2 s
    for _ in range(100):
        await window.record("acme", "t", 10.0)
    assert (await grant_estimate()).p50_ms == 10.0  # read at once, after a quiet spell too
    parsed = held.members_parsed
    for _ in range(9):  # 9 of 100: not a tenth yet, the held estimate stands, unread
        await window.record("acme", "t", 50.0)
    assert (await grant_estimate()).p50_ms == 10.0 and held.members_parsed == parsed
    await window.record("acme", "t", 50.0)  # 10 of 100
    assert (await grant_estimate()).samples == 110
    await redis.delete(window_key("acme", "t"), version_key("acme", "t"))  # the window lapsed
    assert (await grant_estimate()).source == "declared"


async def test_the_held_estimates_are_bounded(redis: Redis) -> None:
    held = EstimateCache(LatencyWindow(redis), max_entries=3)
    for tool in ("a", "b", "c", "d"):
        held.settle("acme", tool, WindowRead(1, ["5.000|o|1"]), 2_000)
    assert len(held) == 3 and held.ask("acme", "a") == (0, 0)  # the oldest went: read it whole
    # Pushed out between a call's admission and its grant: the declared timeout stands in.
    assert held.settle("acme", "a", WindowRead(1), 2_000).p50_ms == 2_000
