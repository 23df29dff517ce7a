"""The per-minute series behind the console's charts: what the audit's writes count, how
close the percentiles read back are, and that callers cannot grow them."""

from __future__ import annotations

import statistics
import time

import pytest
from redis.asyncio import Redis

from gateway.telemetry import SERIES_MINUTES, AuditLog, AuditRecord, CallSeries

pytestmark = pytest.mark.anyio


def _record(at_ms: int, tenant: str, tool: str, outcome: str, ms: float) -> AuditRecord:
    return AuditRecord.model_validate(
        {"at_ms": at_ms, "trace_id": "t", "tenant": tenant, "agent": "a", "transport": "http",
         "operation": tool, "tool": tool, "outcome": outcome, "duration_ms": ms}
    )  # fmt: skip


async def test_counts_per_tenant_and_minute_and_percentiles_within_their_bucket(
    redis: Redis,
) -> None:
    now = int(time.time() * 1000)
    minute = now // 60_000
    durations = [1.0 + i * 0.37 for i in range(200)]  # 1 ms .. 74.6 ms
    records = [_record(now, "acme", "echo", "ok", ms) for ms in durations]
    records += [_record(now, "acme", "echo", "refused", 0.2) for _ in range(7)]
    records += [_record(now - 60_000, "acme", "echo", "failed", 5.0)]
    await AuditLog(redis).append(*records)

    series = CallSeries(redis)
    minutes = series.window(now)
    assert len(minutes) == SERIES_MINUTES and minutes[-1] == minute
    (earlier, current) = (await series.tenants(["acme", "globex"], minutes))["acme"]
    assert (earlier.minute, earlier.requests, earlier.refused) == (minute - 1, 1, 0)
    assert (current.minute, current.requests, current.refused) == (minute, 207, 7)
    echo = (await series.tools(minutes))["echo"]
    assert [(p.minute, p.calls) for p in echo] == [(minute - 1, 1), (minute, 200)]
    exact_p50 = statistics.quantiles(durations, n=100)[49]
    exact_p95 = statistics.quantiles(durations, n=100)[94]
    assert abs(echo[1].p50_ms / exact_p50 - 1) < 0.13
    assert abs(echo[1].p95_ms / exact_p95 - 1) < 0.13
    assert 0 < await redis.ttl(f"conclave:series:{{t:acme}}:{minute}") <= SERIES_MINUTES * 60 + 60


async def test_refused_calls_add_no_latency_fields_whatever_name_they_give(redis: Redis) -> None:
    now = int(time.time() * 1000)
    made_up = [_record(now, "", f"tool-{i}", "refused", 1.0) for i in range(500)]
    await AuditLog(redis).append(*made_up)
    series = CallSeries(redis)
    assert await series.tools(series.window(now)) == {}
    assert await redis.hgetall(f"conclave:series:anonymous:{now // 60_000}") == {"refused": "500"}
