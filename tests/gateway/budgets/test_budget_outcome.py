"""The one-round-trip outcome record: the same effect as the window's and breaker's own."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from gateway.budgets import CircuitBreaker, LatencyWindow, OutcomeRecorder

pytestmark = pytest.mark.anyio

T0 = 7_000_000


async def test_a_sample_and_the_breakers_evidence_land_together(redis: Redis) -> None:
    window = LatencyWindow(redis, window_s=10, max_samples=3, min_samples=1)
    breaker = CircuitBreaker(redis, failures=2, cooldown_ms=1_000)
    recorder = OutcomeRecorder(window, breaker)
    assert (
        await recorder.record("acme", "o_tool", duration_ms=5, healthy=True, now_ms=T0) == "closed"
    )
    # A killed call: a censored sample and a fault; the second fault in a row opens it.
    for i in (1, 2):
        state = await recorder.record(
            "acme", "o_tool", duration_ms=30, censored=True, healthy=False, now_ms=T0 + i
        )
    assert state == "open"
    assert (await breaker.state("acme", "o_tool", now_ms=T0 + 10)).state == "open"
    samples = await window.samples("acme", "o_tool", now_ms=T0 + 10)
    assert sorted((s.duration_ms, s.censored) for s in samples) == [
        (5, False), (30, True), (30, True),
    ]  # fmt: skip
    # The window stays bounded by count, as with `LatencyWindow.record`.
    await recorder.record("acme", "o_tool", duration_ms=7, healthy=None, now_ms=T0 + 20)
    assert len(await window.samples("acme", "o_tool", now_ms=T0 + 20)) == 3


async def test_no_evidence_leaves_the_breaker_alone_and_no_sample_leaves_the_window(
    redis: Redis,
) -> None:
    window = LatencyWindow(redis, min_samples=1)
    breaker = CircuitBreaker(redis, failures=1, cooldown_ms=1_000)
    recorder = OutcomeRecorder(window, breaker)
    # A caller's bad arguments: not run, not the tool's fault.
    assert await recorder.record("acme", "quiet_tool", duration_ms=None, healthy=None) is None
    assert await window.samples("acme", "quiet_tool") == []
    # A deadline-cut timeout: a sample, but no evidence against the tool.
    await recorder.record("acme", "quiet_tool", duration_ms=12, censored=True, healthy=None)
    assert (await breaker.state("acme", "quiet_tool")).state == "closed"
    assert [s.censored for s in await window.samples("acme", "quiet_tool")] == [True]
    # A fault without a sample (it never ran) still counts against the tool.
    assert await recorder.record("acme", "quiet_tool", duration_ms=None, healthy=False) == "open"
