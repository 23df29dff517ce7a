"""The gateway's one Redis connection pool, and the way its per-call Lua scripts are run."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import NoScriptError

from gateway.tracing import TRACING, SpanKind, mark_raised


def connect_redis(url: str) -> Redis:
    """A pooled asyncio client for redis://, rediss:// or unix:// URLs, decoding to str."""
    return Redis.from_url(url, decode_responses=True, health_check_interval=30)


class PooledScript:
    """A Lua script the gateway runs on every call (admission, the outcome record), by EVALSHA
    straight on a pooled connection under that connection's own retry policy.

    The same commands as redis-py's `Script`, without the layers it and `execute_command` add
    per command (~6 us of ~30 per script call on the 2-core VM, two calls per tool call,
    issue 13). A server that lost the script (a restart, SCRIPT FLUSH) is sent it by EVAL,
    which also caches it there, as `Script` does. While tracing is on, each call is a span.
    """

    def __init__(self, redis: Redis, text: str, *, name: str = "script") -> None:
        self._pool = redis.connection_pool
        self._text = text
        self.sha = hashlib.sha1(text.encode()).hexdigest()
        self.name = name  # what a trace calls it: "redis <name>"

    async def __call__(self, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        if TRACING.on:
            return await self._traced(keys, args)
        return await self._call(keys, args)

    async def _traced(self, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        """The call in a client span (keys, arguments and replies stay out of it)."""
        attributes = {"db.system": "redis", "db.operation": "EVALSHA", "conclave.script": self.name}
        with TRACING.span(f"redis {self.name}", attributes, SpanKind.CLIENT) as span:
            try:
                return await self._call(keys, args)
            except Exception as exc:
                mark_raised(span, exc)
                raise

    async def _call(self, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        connection = await self._pool.get_connection()  # type: ignore[no-untyped-call]
        try:
            return await connection.retry.call_with_retry(
                lambda: self._run(connection, keys, args), lambda _: connection.disconnect()
            )
        finally:
            await self._pool.release(connection)

    async def _run(
        self, connection: AbstractConnection, keys: Sequence[Any], args: Sequence[Any]
    ) -> Any:
        try:
            await connection.send_command("EVALSHA", self.sha, len(keys), *keys, *args)
            return await connection.read_response()
        except NoScriptError:
            await connection.send_command("EVAL", self._text, len(keys), *keys, *args)
            return await connection.read_response()
