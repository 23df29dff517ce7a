"""One Redis connection that many concurrent requests share for their per-call scripts.

Each request's admission and state commit is one short script (`gateway.redis_io.redis_client.
PooledScript`). On its own pooled connection each costs a `send` that wakes Redis and a
`recv` for the reply: on the 2-core VM, the gateway's socket writes to Redis were ~20% of its
CPU per state commit under load (py-spy, issue 15). `CoalescedConnection` writes every command
the requests of one event-loop step issue in one `send`, and hands the replies back in order
(Redis answers a connection's commands in the order it got them), as ioredis's
auto-pipelining does. Scripts stay atomic: each is still one command.

Per command it does less than redis-py's own path: `pack` writes the command's RESP bytes
(~5 us for an admission script's 27 arguments, against ~14 us by `pack_command`), and replies
already in the parser's buffer are taken from it without the socket timeout a read is wrapped in
(~5 us a reply): under load one read brings the replies of many commands.

A command whose caller was cancelled still has its reply read (and dropped), so the order
holds. An idle connection is checked before a write, as the pool checks one it hands out (a
connection the server dropped meanwhile is replaced); a connection error fails every command
in flight on it, as on a pooled connection, and the next command takes a new connection.

A session's writer and reader are tasks no scope owns: the shared connection is made on
first use by whichever request runs a script (on whichever loop), and outlives it, so no
task group of a caller's could hold them. Each is held in a field of its own (the loop keeps
only a weak reference to a task), one at a time, and ends once nothing is left to write or read.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any
from weakref import WeakKeyDictionary

# redis-py's parser when hiredis is installed (a dependency), and what its reader answers
# while a reply is not all in its buffer yet.
from redis._parsers.hiredis import NOT_ENOUGH_DATA, _AsyncHiredisParser
from redis.asyncio import ConnectionPool, Redis, RedisCluster
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError, ResponseError


class _Session:
    """One pooled connection's commands: written in order, answered in order. A failure ends
    it for good (its waiters fail); the next command starts a new session."""

    def __init__(self, connection: AbstractConnection, pool: ConnectionPool) -> None:
        self.connection = connection
        self.pool = pool
        self.outgoing: list[bytes] = []  # packed commands not written yet
        self.waiting: deque[asyncio.Future[Any]] = deque()  # written or not, in order
        self.sending = self.reading = self.failed = False
        self.writer: asyncio.Task[None] | None = None
        self.reader: asyncio.Task[None] | None = None

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
                    self.reader = asyncio.get_running_loop().create_task(self.read())
        finally:
            self.sending = False

    async def read(self) -> None:
        try:
            while self.waiting and not self.failed:
                reply = self.buffered()
                if reply is NOT_ENOUGH_DATA:
                    try:
                        reply = await self.connection.read_response()
                    except ResponseError as error:  # the command's own error reply
                        reply = error
                    except BaseException as exc:
                        await self.fail(exc)
                        return
                elif isinstance(reply, RedisConnectionError):  # as read_response raises it
                    await self.fail(reply)
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

    def buffered(self) -> Any:
        """The next reply if the parser holds all of it already (an error reply as its
        exception), else `NOT_ENOUGH_DATA`: then it is read from the socket, under its timeout."""
        parser = self.connection._parser
        if type(parser) is not _AsyncHiredisParser or not parser._connected:
            return NOT_ENOUGH_DATA
        reader = parser._reader
        if reader is None:
            return NOT_ENOUGH_DATA
        reply = reader.gets()
        if isinstance(reply, list) and reply and isinstance(reply[0], RedisConnectionError):
            return reply[0]
        return reply

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
        return await self._queue(session, pack(session.connection, args))

    async def execute_all(self, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
        """Send the commands together, with those of this loop step; their replies in order,
        once all came (the first error reply then raised): a pipeline without a transaction."""
        session = await self._current()
        packed = [pack(session.connection, command) for command in commands]  # all or none
        queued = [self._queue(session, command) for command in packed]
        replies = await asyncio.gather(*queued, return_exceptions=True)
        for reply in replies:
            if isinstance(reply, BaseException):
                raise reply
        return replies

    def _queue(self, session: _Session, command: bytes) -> asyncio.Future[Any]:
        if not session.sending:
            session.sending = True
            session.writer = self.loop.create_task(session.send())
        session.outgoing.append(command)
        reply: asyncio.Future[Any] = self.loop.create_future()
        session.waiting.append(reply)
        return reply


def pack(connection: AbstractConnection, args: tuple[Any, ...]) -> bytes:
    """The command `args` in RESP, as `connection.pack_command` writes it: str as UTF-8 (its
    encoder's), int and float as their text; anything else as its encoder takes it (a bool
    or None refused there, as redis-py refuses them)."""
    out = [b"*%d\r\n" % len(args)]
    encode: Callable[[Any], bytes] = connection.encoder.encode
    utf8 = connection.encoder.encoding == "utf-8"
    for arg in args:
        kind = type(arg)
        if kind is str and utf8:
            data = arg.encode()
        elif kind is bytes:
            data = arg
        elif kind is int:
            data = b"%d" % arg
        else:
            data = encode(arg)
        out.append(b"$%d\r\n%b\r\n" % (len(data), data))
    return b"".join(out)


async def run_commands(redis: Redis, commands: Sequence[tuple[Any, ...]]) -> None:
    """Send `commands` in one round trip without a transaction (as a pipeline does), in order;
    the first error reply is raised once every command ran. On a standalone server they share
    the coalesced connection of the per-call scripts (its packing and reading, cheaper than a
    pipeline's); on a cluster each goes to its key's node in redis-py's cluster pipeline."""
    if isinstance(redis, RedisCluster):
        async with redis.pipeline(transaction=False) as pipe:
            for command in commands:
                pipe.execute_command(*command)
            await pipe.execute()
    else:
        await coalesced(redis.connection_pool).execute_all(commands)


_SHARED: WeakKeyDictionary[ConnectionPool, CoalescedConnection] = WeakKeyDictionary()


def coalesced(pool: ConnectionPool) -> CoalescedConnection:
    """The pool's shared connection for per-call scripts (one per pool and event loop)."""
    shared = _SHARED.get(pool)
    if shared is None or shared.loop is not asyncio.get_running_loop():
        shared = _SHARED[pool] = CoalescedConnection(pool)
    return shared
