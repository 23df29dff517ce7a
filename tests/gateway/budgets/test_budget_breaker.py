from __future__ import annotations

import pytest
from redis.asyncio import Redis

from gateway.budgets import CircuitBreaker, counts_against_tool
from gateway.gateway_error import GatewayError
from protocol.serf import ErrorCode

pytestmark = pytest.mark.anyio

T0 = 5_000_000


async def _fail(breaker: CircuitBreaker, times: int, now: int) -> None:
    for _ in range(times):
        await breaker.admit("acme", "flaky", probe_ttl_ms=100, now_ms=now)
        await breaker.record("acme", "flaky", ok=False, now_ms=now)


async def test_opens_after_consecutive_failures_and_refuses_with_retry_after(redis: Redis) -> None:
    breaker = CircuitBreaker(redis, failures=3, cooldown_ms=1_000)
    await _fail(breaker, 2, T0)
    await breaker.record("acme", "flaky", ok=True, now_ms=T0)  # a success resets the streak
    await _fail(breaker, 3, T0)
    with pytest.raises(GatewayError) as refused:
        await breaker.admit("acme", "flaky", probe_ttl_ms=100, now_ms=T0 + 400)
    error = refused.value.error
    assert error.code == ErrorCode.UPSTREAM_UNAVAILABLE and error.retry_after_ms == 600
    assert error.action == "retry_backoff"  # no deadline: waiting is an option
    with pytest.raises(GatewayError) as hurried:
        await breaker.admit("acme", "flaky", probe_ttl_ms=100, remaining_ms=300, now_ms=T0 + 400)
    assert hurried.value.error.action == "switch_tool"
    assert (await breaker.state("acme", "flaky", now_ms=T0 + 400)).state == "open"
    # Another tenant's breaker of the same tool is its own: still closed, calls pass.
    assert (await breaker.state("globex", "flaky", now_ms=T0 + 400)).state == "closed"
    assert await breaker.admit("globex", "flaky", probe_ttl_ms=100, now_ms=T0 + 400) is False


async def test_half_open_lets_exactly_one_probe_through(redis: Redis) -> None:
    breaker = CircuitBreaker(redis, failures=2, cooldown_ms=1_000)
    await _fail(breaker, 2, T0)
    after = T0 + 1_000
    assert (await breaker.state("acme", "flaky", now_ms=after)).state == "half_open"
    assert await breaker.admit("acme", "flaky", probe_ttl_ms=200, now_ms=after) is True
    with pytest.raises(GatewayError) as second:
        await breaker.admit("acme", "flaky", probe_ttl_ms=200, now_ms=after + 50)
    assert second.value.error.details["breaker"] == "half_open"
    assert second.value.error.retry_after_ms == 150
    # The probe fails: open for another cool-down.
    assert await breaker.record("acme", "flaky", ok=False, now_ms=after + 60) == "open"
    with pytest.raises(GatewayError):
        await breaker.admit("acme", "flaky", probe_ttl_ms=200, now_ms=after + 900)
    # The next probe succeeds: closed, calls flow again.
    assert await breaker.admit("acme", "flaky", probe_ttl_ms=200, now_ms=after + 1_060) is True
    assert await breaker.record("acme", "flaky", ok=True, now_ms=after + 1_070) == "closed"
    assert await breaker.admit("acme", "flaky", probe_ttl_ms=200, now_ms=after + 1_080) is False
    assert (await breaker.state("acme", "flaky")).state == "closed"


async def test_a_lost_probe_is_replaced_after_its_lease(redis: Redis) -> None:
    breaker = CircuitBreaker(redis, failures=1, cooldown_ms=100)
    await _fail(breaker, 1, T0)
    assert await breaker.admit("acme", "flaky", probe_ttl_ms=50, now_ms=T0 + 100) is True
    assert await breaker.admit("acme", "flaky", probe_ttl_ms=50, now_ms=T0 + 151) is True


def test_a_timeout_from_a_cut_grant_is_not_the_tools_fault() -> None:
    assert counts_against_tool(ErrorCode.TOOL_TIMEOUT, granted_ms=2_000, declared_ms=2_000)
    assert not counts_against_tool(ErrorCode.TOOL_TIMEOUT, granted_ms=50, declared_ms=2_000)
    assert counts_against_tool(ErrorCode.TOOL_FAILED, granted_ms=1, declared_ms=400)
    assert not counts_against_tool(ErrorCode.INVALID_ARGUMENTS, granted_ms=1, declared_ms=1)


def test_the_callers_mistakes_never_count_against_the_tool() -> None:
    for code in (ErrorCode.NOT_FOUND, ErrorCode.PERMISSION_DENIED, ErrorCode.INVALID_ARGUMENTS):
        assert not counts_against_tool(code, granted_ms=2_000, declared_ms=2_000)
    assert counts_against_tool(ErrorCode.SANDBOX_KILLED, granted_ms=1, declared_ms=2_000)
