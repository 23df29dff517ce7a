"""`gateway.quotas` on a real Redis, below HTTP: a limit grants exactly what it says under any
concurrency from two replicas' connections; a CPU budget is charged after a call and refuses
the next; `read` shows use and what remains (test_quotas.py beside it drives the same through
two gateway replicas)."""

from __future__ import annotations

import uuid
from typing import Any

import anyio
import pytest
from redis.asyncio import Redis

from gateway.quotas import QuotaBook, Quotas
from gateway.redis_io import connect_redis
from protocol import ErrorCode, QuotaRule

pytestmark = pytest.mark.anyio


async def test_64_concurrent_calls_from_two_replicas_are_granted_exactly_the_quota(
    redis: Redis, redis_url: str
) -> None:
    quotas = Quotas([QuotaRule(name="daily", calls_per_day=17, calls_per_min=40)])
    other = connect_redis(redis_url)  # the second replica's own connections
    books = [QuotaBook(redis, quotas), QuotaBook(other, quotas)]
    try:
        for _ in range(20):
            tenant = f"t{uuid.uuid4().hex[:8]}"
            limits = quotas.limits(tenant, "agent", "echo")
            granted: list[bool] = []

            async def call(book: QuotaBook, limits: Any, granted: list[bool]) -> None:
                granted.append(await book.take(limits) is None)

            async with anyio.create_task_group() as group:
                for i in range(64):
                    group.start_soon(call, books[i % 2], limits, granted)
            assert granted.count(True) == 17, granted
    finally:
        await other.aclose()


async def test_a_refusal_names_the_quota_and_when_to_retry(redis: Redis) -> None:
    quotas = Quotas([QuotaRule(name="per-tool", per=("agent", "tool"), calls_per_min=2)])
    book = QuotaBook(redis, quotas)
    limits = quotas.limits("acme", "bot", "search")
    assert await book.take(limits) is None and await book.take(limits) is None
    refused = await book.take(limits)
    assert refused is not None
    error = refused.error
    assert error.code is ErrorCode.RATE_LIMITED and error.http_status == 429
    assert error.details["quota"] == "per-tool" and error.details["limit"] == "calls_per_min"
    assert error.details["subject"] == "acme/bot:search"
    assert 0 < (error.retry_after_ms or 0) <= 60_000
    assert await book.take(quotas.limits("acme", "bot", "fetch")) is None  # another tool's
    assert await book.take(quotas.limits("acme", "other", "search")) is None  # another agent's


async def test_a_cpu_budget_is_charged_after_the_call_and_refuses_the_next(redis: Redis) -> None:
    quotas = Quotas([QuotaRule(name="cpu", cpu_s_per_day=2.0)])
    book = QuotaBook(redis, quotas)
    limits = quotas.limits("acme", "bot", "run_python")
    assert await book.take(limits) is None
    await book.charge(limits, 1499.2)
    [use] = await book.read(limits)
    assert (use.limit, use.used, use.remaining, use.allowed) == ("cpu_s_per_day", 1.5, 0.5, 2.0)
    assert await book.take(limits) is None  # 1.5 of 2 s used: one more may start
    await book.charge(limits, 600.0)
    refused = await book.take(limits)
    assert refused is not None and "2.1 of its 2 sandbox CPU-seconds" in refused.error.message


def test_a_quota_that_limits_nothing_is_refused() -> None:
    with pytest.raises(ValueError, match="limits nothing"):
        QuotaRule(name="empty")
