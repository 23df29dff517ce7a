"""`listen_to_channel`: read one Redis pub/sub channel for good, on every replica.

The gateway's cross-replica signals (a call's cancel, news for a caller's stream, a client's
answer to a request the gateway sent it) are each one pub/sub channel: whichever replica
learns something publishes it, and every replica applies what it reads to what it holds.
This is the one loop that reads such a channel: it subscribes, tells its starter once
subscribed (a message published after that reaches this replica), passes each message's
data to `apply`, and after a lost connection subscribes again `RELISTEN_S` later. What was
published while it was away is lost, which each channel's users allow for.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import anyio
from anyio.abc import TaskStatus
from redis.asyncio import Redis
from redis.exceptions import RedisError

log = logging.getLogger("conclave.gateway.redis")

RELISTEN_S = 1.0  # after the channel's connection is lost, listen again this soon

Apply = Callable[[bytes | str], None]


async def listen_to_channel(
    redis: Redis,
    channel: str,
    apply: Apply,
    *,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Pass each message published on `channel` to `apply` (its data, as Redis gave it), for
    good; `task_status` is told once subscribed, or after the first attempt failed."""
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
                data = message.get("data") if isinstance(message, dict) else None
                if isinstance(data, bytes | str):
                    apply(data)
        except (RedisError, OSError) as exc:
            log.warning("channel %s lost (%s); listening again in %s s", channel, exc, RELISTEN_S)
        finally:
            with anyio.CancelScope(shield=True):  # its connection closed, even when cancelled
                await pubsub.aclose()  # type: ignore[no-untyped-call]
        if not started:
            started = True
            task_status.started()
        await anyio.sleep(RELISTEN_S)


__all__ = ["RELISTEN_S", "Apply", "listen_to_channel"]
