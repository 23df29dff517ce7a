"""The bytes of a tenant's expiring records (read logs, idempotency records) count in its usage
while the records live, and leave it once they have expired."""

from __future__ import annotations

import dataclasses

import anyio
import pytest
from redis.asyncio import Redis

from gateway.config import Settings
from gateway.state import Actor, NamespaceKeys, StateStore
from protocol import CommitRequest, NamespaceConfig, Write

pytestmark = pytest.mark.anyio


async def _usage(redis: Redis, tenant: str) -> dict[str, int]:
    raw = await redis.hgetall(NamespaceKeys(tenant, "ns").usage)
    return {k: int(v) for k, v in raw.items()}


async def test_expiring_records_are_charged_then_given_back(
    settings: Settings, redis: Redis
) -> None:
    store = StateStore.from_settings(redis, settings)
    store.limits = dataclasses.replace(store.limits, read_log_ttl_s=1, idempotency_ttl_s=1)
    await store.create_namespace("acme", "ns", NamespaceConfig())
    await store.read(Actor("acme", "a", "s1"), "ns", "k")
    request = CommitRequest(writes=[Write(key="w", value=1)], idempotency_key="once")
    await store.commit(Actor("acme", "a", "s2"), "ns", request)
    keys = NamespaceKeys("acme", "ns")
    held = (await _usage(redis, "acme"))["held"]
    # Two read logs and an idempotency record, each with its ledger entry.
    assert held > 3 * 64 and await redis.zcard(keys.expiring) == 3
    first = (keys.read_log("a", "s1"), keys.idempotency("a", "once"))
    with anyio.fail_after(5):  # Redis expires them after their one-second ttl
        while await redis.exists(*first):  # noqa: ASYNC110 (keys expiring in Redis)
            await anyio.sleep(0.05)
    # The next script that touches the usage sweeps what expired: only the new log is left.
    await store.read(Actor("acme", "a", "s3"), "ns", "k")
    assert await redis.zrange(keys.expiring, 0, -1) == [keys.read_log("a", "s3")]
    left = int(await redis.hget(keys.expiring_bytes, keys.read_log("a", "s3")) or 0)
    assert (await _usage(redis, "acme"))["held"] == left > 0
