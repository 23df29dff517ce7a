"""ATBA's plan of a delegation (an A2A agent's SendMessage, `DelegatedCall`) through the
budget stage on a real Redis, and the deadline the agent is told (`onward_deadline_ms`)."""

from __future__ import annotations

import time

import pytest
from redis.asyncio import Redis

from gateway.budgets import (
    Admission,
    AtbaAllocator,
    CircuitBreaker,
    DelegatedCall,
    LatencyWindow,
    TimeAsk,
)
from gateway.delegation import onward_deadline_ms
from gateway.gateway_error import GatewayError
from gateway.pipeline import BudgetStage, RequestContext, ScopeStage
from protocol import ErrorCode, Principal
from tools.registry import default_registry

pytestmark = pytest.mark.anyio

WRITER = DelegatedCall("a2a:writer", 300_000)


async def _granted(redis: Redis, headers: dict[str, str]) -> RequestContext:
    window, breaker = LatencyWindow(redis, min_samples=5), CircuitBreaker(redis, failures=100)
    stage = BudgetStage(
        Admission(redis, rate_per_s=100.0, burst=100),
        AtbaAllocator(window, breaker, default_registry, margin_ms=10),
    )
    ctx = RequestContext("a2a", "a2a:SendMessage", headers, a2a_agent="writer", delegated=WRITER)
    ctx.principal = Principal(tenant="acme", agent="lead", scopes=("agent:*",), expires_at=0,
                              token_id="jti-1")  # fmt: skip
    await ScopeStage()(ctx)
    await stage(ctx)
    return ctx


async def test_a_delegation_gets_what_is_left_after_the_reserve_and_the_margin(
    redis: Redis,
) -> None:
    deadline = int(time.time() * 1000) + 5_000
    asked_at = time.time() * 1000
    ctx = await _granted(
        redis, {"x-conclave-deadline": str(deadline), "x-conclave-reserve": "2000"}
    )
    assert ctx.granted_ms is not None and ctx.kill_margin_ms == 10
    assert asked_at + ctx.granted_ms <= deadline - 2_000 - 10  # the caller's reserve is its own
    assert ctx.granted_ms >= 3_000 - 10 - 500  # and the rest is the delegation's
    told = onward_deadline_ms(ctx.time_ask, ctx.granted_ms, ctx.kill_margin_ms)
    assert told is not None and deadline - 2_000 - 10 - 500 <= told <= deadline - 2_000 - 10


async def test_without_a_deadline_the_agents_timeout_applies(redis: Redis) -> None:
    ctx = await _granted(redis, {})
    assert ctx.granted_ms is None
    assert onward_deadline_ms(ctx.time_ask, ctx.granted_ms) is None


async def test_an_agent_known_to_take_longer_than_is_left_is_not_started(redis: Redis) -> None:
    window = LatencyWindow(redis, min_samples=5)
    for duration in range(1_000, 1_010):  # the writer answers lead's tenant in about 1 s
        await window.record("acme", "a2a:writer", float(duration))
    deadline = int(time.time() * 1000) + 600
    with pytest.raises(GatewayError) as refused:
        await _granted(redis, {"x-conclave-deadline": str(deadline)})
    assert refused.value.error.code is ErrorCode.BUDGET_EXHAUSTED
    assert "a2a:writer" in refused.value.error.message


def test_the_agent_is_told_no_later_than_the_share_whenever_it_is_asked() -> None:
    ask = TimeAsk(deadline_ms=10_000, reserve_ms=1_000)
    assert onward_deadline_ms(ask, None) == 10_000  # no grant: the run's deadline as it came
    assert onward_deadline_ms(ask, 5_000, 10, now_ms=2_000) == 7_000  # the grant from now
    # Asked a moment after the grant was weighed: never past the reserve and the margin.
    assert onward_deadline_ms(ask, 8_990, 10, now_ms=500) == 8_990
