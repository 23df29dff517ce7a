"""`listen_channel`: one Redis pub/sub channel, read for good, each message handed to a
function; the one loop every replica-wide channel of the gateway runs (the MCP news relay,
`gateway.http.mcp.caller_streams`; the cancel channel, `gateway.cancellation`).

A lost connection is logged and the channel subscribed to again `RELISTEN_S` later: what
was published meanwhile is lost, which each channel's owner allows for (news and cancels
are advisory). `task_status` is told once the first subscription holds (or the first try
failed), so a caller that starts it with `TaskGroup.start` knows that what is published
from then on is heard.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import anyio
from anyio.abc import TaskStatus
from redis.asyncio import Redis
from redis.exceptions import RedisError

log = logging.getLogger("conclave.gateway.redis")

RELISTEN_S = 1.0  # after the channel's connection is lost, listen again this soon


async def listen_channel(
    redis: Redis,
    channel: str,
    apply: Callable[[dict[str, Any]], None],
    *,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Hand every message published on `channel` to `apply`, for good."""
    started = False
    while True:
        pubsub = redis.pubsub(ignore_subscribe_messages=True)
        try:
            # A cluster client maps its slots on its first command; its pubsub needs the map
            # (it picks the channel's node from it) but does not make one itself.
            await redis.ping()
            await pubsub.subscribe(channel)
            if not started:
                started = True
                task_status.started()
            async for message in pubsub.listen():
                apply(message)
        except (RedisError, OSError) as exc:
            log.warning("channel %s lost (%s); listening again in %s s", channel, exc, RELISTEN_S)
        finally:
            with anyio.CancelScope(shield=True):  # its connection closed, even when cancelled
                await pubsub.aclose()  # type: ignore[no-untyped-call]
        if not started:
            started = True
            task_status.started()
        await anyio.sleep(RELISTEN_S)


__all__ = ["RELISTEN_S", "listen_channel"]
