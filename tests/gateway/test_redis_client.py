"""The per-call Lua scripts' runner (`PooledScript`), against a real Redis."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from gateway import connect_redis
from gateway.redis_client import PooledScript

pytestmark = pytest.mark.anyio

_ECHO = "return {KEYS[1], ARGV[1], redis.call('INCR', KEYS[1])}"


async def test_a_script_the_server_lost_is_sent_again(redis: Redis) -> None:
    script = PooledScript(redis, _ECHO)
    assert await script(keys=["runs"], args=["a"]) == ["runs", "a", 1]
    await redis.script_flush()  # as after a restart without persistence
    assert await script(keys=["runs"], args=[2.5]) == ["runs", "2.5", 2]


async def test_a_connection_the_server_dropped_is_replaced(redis: Redis, redis_url: str) -> None:
    own = connect_redis(redis_url)
    try:
        script = PooledScript(own, _ECHO)
        assert await script(keys=["runs"], args=["a"]) == ["runs", "a", 1]
        await redis.client_kill_filter(_type="normal", skipme=True)
        assert await script(keys=["runs"], args=["b"]) == ["runs", "b", 2]
    finally:
        await own.aclose()
