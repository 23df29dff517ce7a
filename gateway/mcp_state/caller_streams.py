"""`CallerStreams`: the server-to-client streams `/mcp` holds open (`GET /mcp`), and the
Redis channel that feeds them from every replica.

A client opens one stream per identity and gateway replica it talks to (the handshake era's
standalone SSE stream, or the 2026-07-28 wire's `subscriptions/listen` answers, which take
only the kinds of news their filter asked for); what the gateway has to tell an identity
outside any request's answer travels there: `notifications/resources/updated` for a
resource it subscribed to, and `notifications/{tools,resources,prompts}/list_changed` when a
source it sees changes. Any
replica may learn such news (an upstream speaks to one of them), so news is published on one
Redis pub/sub channel (`CHANNEL`); each replica delivers what it reads there to the streams it
holds of that identity (or, for a list change, of every identity that sees the source). The
key is the authenticated identity (tenant, agent), never a value the client sent.

Each stream buffers at most `BUFFER` messages: a client that does not read loses the newest
notifications, never the gateway's memory; an identity holds at most `MAX_PER_IDENTITY`
streams on a replica (a new one ends its oldest: a client reconnecting over a half-dead
connection is served). A stream ends when its token expires or is revoked, and when its
replica shuts down (`close_all`). News
published while no stream of the identity is open is lost, as MCP allows (a client re-reads
or re-lists when it reconnects).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from redis.asyncio import Redis

from gateway.redis_io import listen_to_channel
from protocol import Principal

CHANNEL = "conclave:mcp:notify"  # pub/sub: [tenant | null, agent | null, source, message]
BUFFER = 64  # messages a stream holds for a client that has not read them yet
MAX_PER_IDENTITY = 4  # streams an identity holds open on one replica

Identity = tuple[str, str]
Sees = Callable[[Principal, str], bool]  # whether a principal sees a source
Accepts = Callable[[dict[str, Any]], bool]  # whether a stream takes a message


@dataclass(eq=False)
class _Stream:
    principal: Principal
    send: MemoryObjectSendStream[dict[str, Any]]
    accepts: Accepts | None  # a `subscriptions/listen` stream's filter; None takes all


class CallerStreams:
    def __init__(self, redis: Redis, sees: Sees) -> None:
        self.redis = redis
        self.sees = sees
        self._streams: dict[Identity, list[_Stream]] = {}

    def __len__(self) -> int:
        return sum(len(streams) for streams in self._streams.values())

    @asynccontextmanager
    async def opened(
        self, principal: Principal, accepts: Accepts | None = None
    ) -> AsyncIterator[MemoryObjectReceiveStream[dict[str, Any]]]:
        """A stream of the messages for `principal` (those `accepts` takes, when given),
        while the block runs."""
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](BUFFER)
        stream = _Stream(principal, send, accepts)
        identity = (principal.tenant, principal.agent)
        held = self._streams.setdefault(identity, [])
        if len(held) >= MAX_PER_IDENTITY:
            held.pop(0).send.close()  # its reader sees the end of its stream
        held.append(stream)
        try:
            async with receive:
                yield receive
        finally:
            streams = self._streams.get(identity, [])
            if stream in streams:
                streams.remove(stream)
            if not streams:
                self._streams.pop(identity, None)
            send.close()

    def close_all(self) -> None:
        """End every stream this replica holds (it is shutting down: a stream open for good
        must not hold the shutdown for its grace). Each client reconnects elsewhere."""
        for held in self._streams.values():
            for stream in held:
                stream.send.close()

    async def to_identity(self, identity: Identity, source: str, message: dict[str, Any]) -> None:
        """Send `message` (about `source`) to the identity's streams, on any replica."""
        await self.redis.publish(CHANNEL, json.dumps([*identity, source, message]))

    async def to_viewers(self, source: str, message: dict[str, Any]) -> None:
        """Send `message` to the streams of every identity that sees `source`."""
        await self.redis.publish(CHANNEL, json.dumps([None, None, source, message]))

    def deliver_here(self, identity: Identity | None, source: str, message: dict[str, Any]) -> int:
        """Put `message` on this replica's streams it is for; how many took it."""
        if identity is not None:
            streams = list(self._streams.get(identity, ()))
        else:
            streams = [s for held in self._streams.values() for s in held]
        delivered = 0
        for stream in streams:
            if not self.sees(stream.principal, source):
                continue  # its scopes no longer cover the source
            if stream.accepts is not None and not stream.accepts(message):
                continue  # a listen stream's filter: never a kind it did not ask for
            try:
                stream.send.send_nowait(message)
                delivered += 1
            except (anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
                continue  # a client that does not read loses the news, not our memory
        return delivered

    async def listen(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Deliver what is published on `CHANNEL` for good; `task_status` is told once
        subscribed."""
        await listen_to_channel(self.redis, CHANNEL, self._apply, task_status=task_status)

    def _apply(self, data: bytes | str) -> None:
        try:
            tenant, agent, source, message = json.loads(data)
        except (TypeError, ValueError):
            return  # not ours: the channel's name is public to whoever shares the Redis
        if not isinstance(message, dict) or not isinstance(source, str):
            return
        identity = (str(tenant), str(agent)) if tenant is not None else None
        self.deliver_here(identity, source, message)


__all__ = [
    "BUFFER",
    "CHANNEL",
    "MAX_PER_IDENTITY",
    "Accepts",
    "CallerStreams",
    "Identity",
    "Sees",
]
