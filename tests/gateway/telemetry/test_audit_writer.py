"""The audit writer's round trips, against a real Redis: a backlog goes out in parts."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from redis.asyncio import Redis

from gateway.redis_io import connect_redis, run_commands
from gateway.telemetry import FEED_STREAM, AuditLog, AuditRecord, AuditWriter
from gateway.telemetry.audit import MAX_BATCH, Command, audit_stream

pytestmark = pytest.mark.anyio


async def test_a_backlog_is_written_whole_in_round_trips_of_a_bounded_size(
    redis: Redis, redis_url: str
) -> None:
    """Records gathered while Redis was away (2.5 round trips' worth) all reach the tenant's
    stream, in order, and no round trip carries more than `MAX_BATCH` of them: the tool calls
    whose scripts share that connection wait behind one part, never the whole backlog."""
    own = connect_redis(redis_url)
    sizes: list[int] = []

    async def send(commands: Sequence[Command]) -> None:
        sizes.append(sum(1 for command in commands if command[1] == audit_stream("acme")))
        await run_commands(own, commands)

    try:
        writer = AuditWriter(AuditLog(own), send=send)  # not started: nothing drains it
        count = MAX_BATCH * 5 // 2
        for n in range(count):
            writer.submit(
                AuditRecord(
                    at_ms=n, trace_id=f"t{n}", tenant="acme", transport="http",
                    operation="echo", outcome="ok", duration_ms=0.1,
                )
            )  # fmt: skip
        await writer.flush()
        assert sizes == [MAX_BATCH, MAX_BATCH, count - 2 * MAX_BATCH]
        written = await AuditLog(own).query(tenant="acme", limit=count + 1)
        assert [record.trace_id for record in written] == [f"t{n}" for n in reversed(range(count))]
        assert await redis.xlen(FEED_STREAM) == count
    finally:
        await own.aclose()
