"""The per-call Lua scripts' runner (`PooledScript`), against a real Redis."""

from __future__ import annotations

import anyio
import pytest
from redis.asyncio import Redis
from redis.exceptions import DataError, ResponseError

from gateway import connect_redis
from gateway.redis_io import PooledScript, run_commands

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


async def test_concurrent_calls_share_one_connection_and_get_their_own_replies(
    redis: Redis, redis_url: str
) -> None:
    """100 concurrent calls go out on one connection (a pooled connection each, before), each
    caller gets its own reply, and a caller cancelled mid-flight shifts no one's reply."""
    own = connect_redis(redis_url)
    try:
        script = PooledScript(own, _ECHO)
        await script(keys=["warm"], args=["-"])
        before = len(await redis.client_list())
        replies: dict[int, object] = {}

        async def call(n: int) -> None:
            replies[n] = await script(keys=[f"k{n}"], args=[n])

        async with anyio.create_task_group() as tasks:
            for n in range(100):
                tasks.start_soon(call, n)
            with anyio.move_on_after(0):  # cancelled while its command is in flight
                await script(keys=["cancelled"], args=["x"])
        assert replies == {n: [f"k{n}", str(n), 1] for n in range(100)}
        assert len(await redis.client_list()) == before
        assert await script(keys=["after"], args=["y"]) == ["after", "y", 1]
    finally:
        await own.aclose()


async def test_commands_sent_together_run_in_order_and_an_error_is_raised_after_the_rest_ran(
    redis: Redis, redis_url: str
) -> None:
    """`run_commands` (the audit writer's round trip, on the scripts' shared connection): text
    in any script, bytes and numbers arrive as redis-py would send them, in order; a command the
    server refuses raises its error after the others ran, and the connection serves the next."""
    own = connect_redis(redis_url)
    try:
        words = ["plain", "naïve ünïcode ✓", "", "x" * 70_000]
        await run_commands(
            own,
            [
                *[("RPUSH", "words", word) for word in words],
                ("SET", "raw", b"\x00bytes"),
                ("INCRBYFLOAT", "float", 2.5),
                ("INCRBY", "int", -7),
            ],
        )
        assert await redis.lrange("words", 0, -1) == words
        with pytest.raises(ResponseError, match="WRONGTYPE"):
            await run_commands(own, [("INCR", "after"), ("INCR", "words"), ("INCR", "after")])
        assert await redis.get("after") == "2"  # both ran: no transaction, as a pipeline
        with pytest.raises(DataError):  # refused as redis-py refuses it, before any is sent
            await run_commands(own, [("INCR", "after"), ("SET", "flag", True)])
        await run_commands(own, [("INCR", "after")])
        assert await redis.mget("raw", "float", "int", "after") == [
            "\x00bytes",
            "2.5",
            "-7",
            "3",
        ]
    finally:
        await own.aclose()
