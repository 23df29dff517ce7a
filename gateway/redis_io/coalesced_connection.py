"""One Redis connection that many concurrent requests share for their per-call scripts.

Each request's admission and state commit is one short script (`gateway.redis_io.redis_client.
PooledScript`). On its own pooled connection each costs a `send` that wakes Redis and a
`recv` for the reply: on the 2-core VM, the gateway's socket writes to Redis were ~20% of its
CPU per state commit under load (py-spy, issue 15). `CoalescedConnection` writes every command
the requests of one event-loop step issue in one `send`, and hands the replies back in order
(Redis answers a connection's commands in the order it got them), as ioredis's
auto-pipelining does. Scripts stay atomic: each is still one command.

A command whose caller was cancelled still has its reply read (and dropped), so the order
holds. An idle connection is checked before a write, as the pool checks one it hands out (a
connection the server dropped meanwhile is replaced); a connection error fails every command
in flight on it, as on a pooled connection, and the next command takes a new connection.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any
from weakref import WeakKeyDictionary

from redis.asyncio import ConnectionPool
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError, ResponseError

from gateway.held_tasks import HeldTasks


class _Session:
    """One pooled connection's commands: written in order, answered in order. A failure ends
    it for good (its waiters fail); the next command starts a new session."""

    def __init__(self, connection: AbstractConnection, pool: ConnectionPool) -> None:
        self.connection = connection
        self.pool = pool
        self.outgoing: list[bytes] = []  # packed commands not written yet
        self.waiting: deque[asyncio.Future[Any]] = deque()  # written or not, in order
        self.sending = self.reading = self.failed = False
        self.tasks = HeldTasks()  # its writer and reader

    async def send(self) -> None:
        """Write what has gathered, one write at a time, until nothing is left."""
        try:
            while self.outgoing and not self.failed:
                chunks, self.outgoing = self.outgoing, []
                try:
                    if not self.reading:  # idle: was it dropped meanwhile? (as the pool checks)
                        await self.pool.ensure_connection(self.connection)
                    await self.connection.send_packed_command(chunks, check_health=False)
                except BaseException as exc:
                    await self.fail(exc)
                    return
                if not self.reading and not self.failed:  # after the write: it connects first
                    self.reading = True
                    self.tasks.start(self.read())
        finally:
            self.sending = False

    async def read(self) -> None:
        try:
            while self.waiting and not self.failed:
                try:
                    reply = await self.connection.read_response()
                except ResponseError as error:  # the command's own error reply
                    reply = error
                except BaseException as exc:
                    await self.fail(exc)
                    return
                waiter = self.waiting.popleft()
                if waiter.done():  # its caller was cancelled
                    continue
                if isinstance(reply, ResponseError):
                    waiter.set_exception(reply)
                else:
                    waiter.set_result(reply)
        finally:
            self.reading = False

    async def fail(self, exc: BaseException) -> None:
        """Every command of this session fails with `exc`; its connection goes back closed."""
        if self.failed:
            return
        self.failed = True
        if not isinstance(exc, RedisError):  # a write cut short by the disconnect, say
            exc = RedisConnectionError(f"the shared Redis connection failed: {exc!r}")
        waiting, self.waiting, self.outgoing = self.waiting, deque(), []
        for waiter in waiting:
            if not waiter.done():
                waiter.set_exception(exc)
        await self.connection.disconnect(nowait=True)
        await self.pool.release(self.connection)


class CoalescedConnection:
    def __init__(self, pool: ConnectionPool) -> None:
        self._pool = pool
        self._session: _Session | None = None
        self.loop = asyncio.get_running_loop()

    async def _current(self) -> _Session:
        if self._session is None or self._session.failed:
            connection = await self._pool.get_connection()  # type: ignore[no-untyped-call]
            if self._session is None or self._session.failed:
                self._session = _Session(connection, self._pool)
            else:  # another caller started one meanwhile
                await self._pool.release(connection)
        return self._session

    async def connection(self) -> AbstractConnection:
        """The shared connection (its `retry` is the policy for commands on it)."""
        return (await self._current()).connection

    async def execute(self, *args: Any) -> Any:
        """Send the command with those of this loop step; its reply (an error reply raised)."""
        session = await self._current()
        if not session.sending:
            session.sending = True
            session.tasks.start(session.send())
        session.outgoing.extend(session.connection.pack_command(*args))
        reply: asyncio.Future[Any] = self.loop.create_future()
        session.waiting.append(reply)
        return await reply


_SHARED: WeakKeyDictionary[ConnectionPool, CoalescedConnection] = WeakKeyDictionary()


def coalesced(pool: ConnectionPool) -> CoalescedConnection:
    """The pool's shared connection for per-call scripts (one per pool and event loop)."""
    shared = _SHARED.get(pool)
    if shared is None or shared.loop is not asyncio.get_running_loop():
        shared = _SHARED[pool] = CoalescedConnection(pool)
    return shared
