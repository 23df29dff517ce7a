"""Per-call Lua scripts (PooledScript) on a Redis Cluster: routed by their keys' slot."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from conclave.bench.chaos.redis_cluster import LocalRedisCluster
from gateway.redis_io import PooledScript, connect_redis

pytestmark = pytest.mark.anyio

_SET = "redis.call('SET', KEYS[1], ARGV[1]) return redis.call('GET', KEYS[1])"


async def test_a_script_follows_its_slot_to_another_master(
    redis_cluster: LocalRedisCluster, redis: Redis
) -> None:
    """A slot that moved after the client read the slot map (MOVED) is found again."""
    client = connect_redis(redis_cluster.url)
    try:
        script = PooledScript(client, _SET, name="set")
        key = "conclave:test:{moving}"
        assert await script([key], ["first"]) == "first"
        await client.delete(key)
        before = redis_cluster.node_of_key(key)
        to = next(port for port in redis_cluster.masters() if port != before)
        redis_cluster.move_empty_slot(key, to)
        assert await script([key], ["second"]) == "second"
        assert redis_cluster.node_of_key(key) == to
        assert await client.get(key) == "second"
    finally:
        await client.aclose()


async def test_scripts_of_keys_on_every_master_run_where_their_keys_live(
    redis_cluster: LocalRedisCluster, redis: Redis
) -> None:
    script = PooledScript(redis, _SET, name="set")
    keys = [f"conclave:test:{{tag{i}}}" for i in range(12)]
    for key in keys:
        assert await script([key], [key]) == key
    assert {redis_cluster.node_of_key(k) for k in keys} == set(redis_cluster.masters())
    assert [await redis.get(k) for k in keys] == keys
