"""What the budgets learn from a finished call: samples, kill lateness, breaker evidence."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from gateway.budgets import CallFeedback, CircuitBreaker, LatencyWindow, kill_overshoot_of
from protocol import ErrorCode, SerfError

pytestmark = pytest.mark.anyio


def _parts(redis: Redis) -> tuple[LatencyWindow, CircuitBreaker, CallFeedback]:
    window = LatencyWindow(redis, min_samples=1)
    breaker = CircuitBreaker(redis, failures=1, cooldown_ms=60_000)
    return window, breaker, CallFeedback(window, breaker)


async def test_a_kill_is_a_censored_sample_and_its_lateness_is_kept(redis: Redis) -> None:
    window, breaker, feedback = _parts(redis)
    killed = SerfError.of(ErrorCode.TOOL_TIMEOUT, "killed")
    await feedback.learn(
        "acme", "slow", killed, wall_ms=290.0, granted_ms=300, declared_ms=300,
        stop_by_ms=1_000, answered_ms=1_025.0,
    )  # fmt: skip
    [sample] = await window.samples("acme", "slow")
    assert (sample.duration_ms, sample.censored) == (300, True)
    [late] = await window.samples("acme", kill_overshoot_of("slow"))
    assert late.duration_ms == 25  # answered 25 ms past the sandbox's deadline
    # It had its whole declared timeout: the tool broke its promise.
    assert (await breaker.state("acme", "slow")).state == "open"
    # All of it is the tenant's own: another tenant's window, margin and breaker are clean.
    assert await window.samples("globex", "slow") == []
    assert await window.samples("globex", kill_overshoot_of("slow")) == []
    assert (await breaker.state("globex", "slow")).state == "closed"


async def test_a_deadline_cut_is_not_the_tools_fault_and_a_call_not_run_teaches_nothing(
    redis: Redis,
) -> None:
    window, breaker, feedback = _parts(redis)
    cut = SerfError.of(ErrorCode.TOOL_TIMEOUT, "cut", details={"killed_by": "gateway"})
    await feedback.learn(
        "acme", "t", cut, wall_ms=80.0, granted_ms=50, declared_ms=2_000,
        stop_by_ms=None, answered_ms=0.0,
    )  # fmt: skip
    assert (await breaker.state("acme", "t")).state == "closed"
    assert [s.censored for s in await window.samples("acme", "t")] == [True]
    no_sandbox = SerfError.of(ErrorCode.SANDBOX_UNAVAILABLE, "busy")
    await feedback.learn(
        "acme", "u", no_sandbox, wall_ms=3.0, granted_ms=50, declared_ms=50,
        stop_by_ms=None, answered_ms=0.0,
    )  # fmt: skip
    assert await window.samples("acme", "u") == []
    assert (await breaker.state("acme", "u")).state == "closed"


async def test_a_result_is_a_plain_sample_and_no_kill_lateness(redis: Redis) -> None:
    window, _, feedback = _parts(redis)
    await feedback.learn(
        "acme", "ok", None, wall_ms=12.5, granted_ms=2_000, declared_ms=2_000,
        stop_by_ms=None, answered_ms=0.0,
    )  # fmt: skip
    assert [(s.duration_ms, s.censored) for s in await window.samples("acme", "ok")] == [
        (12.5, False)
    ]
    assert await window.samples("acme", kill_overshoot_of("ok")) == []


async def test_a_cancelled_call_is_a_censored_sample_and_no_evidence_against_the_tool(
    redis: Redis,
) -> None:
    window, breaker, feedback = _parts(redis)
    cancelled = SerfError.of(ErrorCode.CANCELLED, "the caller went away")
    await feedback.learn(
        "acme", "long", cancelled, wall_ms=1_200.0, granted_ms=30_000, declared_ms=30_000,
        stop_by_ms=None, answered_ms=1_000.0,
    )  # fmt: skip
    # It would have taken at least the 1.2 s it ran: a censored sample at that.
    [sample] = await window.samples("acme", "long")
    assert (sample.duration_ms, sample.censored) == (1_200, True)
    assert await window.samples("acme", kill_overshoot_of("long")) == []  # nothing killed late
    assert (await breaker.state("acme", "long")).state == "closed"  # not the tool's fault
