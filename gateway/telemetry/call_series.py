"""Per-minute counts of what the audit records: each tenant's requests by outcome and each
tool's latency histogram, for the console's charts.

Written with the audit records they count (`AuditLog.append` adds these commands to its own
pipelined round trip, summed over the batch), so the request's path pays nothing more. Kept
`SERIES_MINUTES` minutes (each minute's hash expires after that), so bounded by construction:

- ``conclave:series:{t:<tenant>}:<minute>``  hash: outcome (ok, refused, failed, cancelled)
  -> requests; in the tenant's hash slot. Requests refused before a tenant was known count
  under ``conclave:series:anonymous:<minute>``. Tenants come from verified tokens only.
- ``conclave:series:tools:<minute>``  hash: ``<tool>|<bucket>`` -> calls whose duration (the
  audit's `duration_ms`: through the whole pipeline, as the caller waited) fell in the bucket.
  Only calls that reached a served tool (outcome ok or failed) count, so the fields are
  bounded by the served tools times `BUCKETS`, whatever names callers send.

Like the audit streams they count, the series are bounded by count, not charged to a tenant's
byte quota: a tenant holds at most `SERIES_MINUTES` + 1 hashes of four fields.

A bucket spans a factor of `GROWTH` (bucket i holds durations up to `FLOOR_MS * GROWTH**i`),
so a percentile read back is the geometric middle of its bucket: within about 12 % of the
exact figure. `<minute>` is the record's epoch minute.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, cast

from redis.asyncio import Redis

SERIES_MINUTES = 60
FLOOR_MS = 0.1
GROWTH = 1.25
BUCKETS = 64  # the last one holds everything past FLOOR_MS * GROWTH**63 (about 13 min)
OUTCOMES = ("ok", "refused", "failed", "cancelled")
_TIMED = frozenset({"ok", "failed"})  # outcomes of a call that reached a served tool
_TOOLS_PREFIX = "conclave:series:tools:"


def tenant_series_key(tenant: str, minute: int) -> str:
    if not tenant:
        return f"conclave:series:anonymous:{minute}"
    return f"conclave:series:{{t:{tenant}}}:{minute}"


def tools_series_key(minute: int) -> str:
    return f"{_TOOLS_PREFIX}{minute}"


def bucket_of(duration_ms: float) -> int:
    if duration_ms <= FLOOR_MS:
        return 0
    return min(BUCKETS - 1, math.ceil(math.log(duration_ms / FLOOR_MS, GROWTH)))


def bucket_middle_ms(bucket: int) -> float:
    """The geometric middle of a bucket: what a percentile falling in it reads as."""
    upper = FLOOR_MS * GROWTH**bucket
    return upper if bucket == 0 else upper / math.sqrt(GROWTH)


class CountedRecord(Protocol):
    """What the series read of an audit record (`gateway.telemetry.audit.AuditRecord`)."""

    @property
    def at_ms(self) -> int: ...
    @property
    def tenant(self) -> str: ...
    @property
    def outcome(self) -> str: ...
    @property
    def tool(self) -> str: ...
    @property
    def duration_ms(self) -> float: ...


def series_commands(records: Sequence[CountedRecord]) -> list[tuple[str | int, ...]]:
    """The Redis commands counting `records` (sent in the audit's own round trip)."""
    tenants: Counter[tuple[str, int, str]] = Counter()
    tools: Counter[tuple[int, str]] = Counter()
    for record in records:
        minute = record.at_ms // 60_000
        tenants[(record.tenant, minute, record.outcome)] += 1
        if record.tool and record.outcome in _TIMED:
            tools[(minute, f"{record.tool}|{bucket_of(record.duration_ms)}")] += 1
    commands: list[tuple[str | int, ...]] = []
    expiring: dict[str, None] = {}  # in order
    for (tenant, minute, outcome), count in tenants.items():
        key = tenant_series_key(tenant, minute)
        commands.append(("HINCRBY", key, outcome, count))
        expiring[key] = None
    for (minute, field), count in tools.items():
        key = tools_series_key(minute)
        commands.append(("HINCRBY", key, field, count))
        expiring[key] = None
    commands += [("EXPIRE", key, SERIES_MINUTES * 60 + 60) for key in expiring]
    return commands


@dataclass(frozen=True)
class TenantMinute:
    minute: int
    counts: dict[str, int]

    @property
    def requests(self) -> int:
        return sum(self.counts.values())

    @property
    def refused(self) -> int:
        return self.counts.get("refused", 0)


@dataclass(frozen=True)
class ToolMinute:
    minute: int
    calls: int
    p50_ms: float
    p95_ms: float


def _percentile(histogram: dict[int, int], total: int, q: float) -> float:
    rank = max(1, math.ceil(q * total))
    seen = 0
    for bucket in sorted(histogram):
        seen += histogram[bucket]
        if seen >= rank:
            return bucket_middle_ms(bucket)
    return bucket_middle_ms(max(histogram))


class CallSeries:
    """Reads the newest minutes back: per tenant, per tool."""

    def __init__(self, redis: Redis, minutes: int = SERIES_MINUTES) -> None:
        self.redis = redis
        self.minutes = minutes

    def window(self, now_ms: int) -> list[int]:
        """The minutes shown, oldest first, ending with the current one."""
        current = now_ms // 60_000
        return list(range(current - self.minutes + 1, current + 1))

    async def tenants(
        self, tenants: Iterable[str], minutes: Sequence[int]
    ) -> dict[str, list[TenantMinute]]:
        """Each tenant's minutes that saw requests, oldest first."""
        names = list(tenants)
        async with self.redis.pipeline(transaction=False) as pipe:
            for tenant in names:
                for minute in minutes:
                    pipe.hgetall(tenant_series_key(tenant, minute))
            found = cast(list[dict[str, str]], await pipe.execute())
        series: dict[str, list[TenantMinute]] = {}
        for i, tenant in enumerate(names):
            hashes = found[i * len(minutes) : (i + 1) * len(minutes)]
            series[tenant] = [
                TenantMinute(minute, {k: int(v) for k, v in counts.items()})
                for minute, counts in zip(minutes, hashes, strict=True)
                if counts
            ]
        return series

    async def tools(self, minutes: Sequence[int]) -> dict[str, list[ToolMinute]]:
        """Each tool's minutes that saw calls, oldest first, with their p50 and p95."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for minute in minutes:
                pipe.hgetall(tools_series_key(minute))
            found = cast(list[dict[str, str]], await pipe.execute())
        series: dict[str, list[ToolMinute]] = {}
        for minute, fields in zip(minutes, found, strict=True):
            histograms: dict[str, dict[int, int]] = {}
            for field, count in fields.items():
                tool, _, bucket = field.rpartition("|")
                if bucket.isdigit():
                    histograms.setdefault(tool, {})[int(bucket)] = int(count)
            for tool, histogram in histograms.items():
                total = sum(histogram.values())
                series.setdefault(tool, []).append(
                    ToolMinute(
                        minute,
                        total,
                        _percentile(histogram, total, 0.50),
                        _percentile(histogram, total, 0.95),
                    )
                )
        return dict(sorted(series.items()))
