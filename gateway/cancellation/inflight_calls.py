"""`InflightCalls`: the MCP calls this replica runs, findable from any replica to cancel them.

MCP's `notifications/cancelled` is a POST of its own, which may land on another replica than the
call it names (docs/architecture.md, "One MCP request": nothing per connection). Each replica
keeps a table of the tool calls it runs, keyed by the caller's identity (tenant, agent) and the
call's JSON-RPC request id, and listens on one Redis pub/sub channel (`CHANNEL`); a cancel
received by any replica is published there, and the replica running a call of that key pulls its
`CallCancel`. The key is the authenticated caller's, never the message's: a cancel from another
identity names another key, so one identity can only ever cancel its own calls.

Per call this costs a dict entry, no Redis round trip; a cancel is one PUBLISH, seen by every
replica (cancels are rare). A cancel published while no replica listens is lost, as MCP
allows: cancellation is advisory, and a call still ends at its time limit.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import anyio
from anyio.abc import TaskStatus
from redis.asyncio import Redis

from gateway.cancellation.call_cancel import CallCancel
from gateway.redis_io import listen_to_channel
from protocol import Principal

CHANNEL = "conclave:cancel"  # pub/sub: [tenant, agent, request id (JSON), reason]
MAX_REASON = 200  # a cancel's reason is the caller's text: what is kept of it
CALLER_CANCELLED = "the caller sent notifications/cancelled"

CallKey = tuple[str, str, str]


def call_key(principal: Principal, request_id: str | int) -> CallKey:
    """The key of `principal`'s call `request_id` (a JSON-RPC id: "1" and 1 differ)."""
    return principal.tenant, principal.agent, json.dumps(request_id)


class InflightCalls:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self._calls: dict[CallKey, list[CallCancel]] = {}

    def __len__(self) -> int:
        return sum(len(cancels) for cancels in self._calls.values())

    @contextmanager
    def running(self, key: CallKey, cancel: CallCancel) -> Iterator[None]:
        """Make the call `key` cancellable from any replica while the block runs."""
        self._calls.setdefault(key, []).append(cancel)
        try:
            yield
        finally:
            cancels = self._calls[key]
            cancels.remove(cancel)
            if not cancels:
                del self._calls[key]

    async def cancel(self, key: CallKey, reason: str | None, *, by: str = CALLER_CANCELLED) -> None:
        """Cancel the call `key`, wherever it runs (one PUBLISH); `by` says who asked."""
        said = by if not reason else f"{by}: {reason[:MAX_REASON]}"
        await self.redis.publish(CHANNEL, json.dumps([*key, said]))

    def cancel_here(self, key: CallKey, reason: str) -> int:
        """Pull the switch of every call `key` this replica runs; how many there were."""
        cancels = list(self._calls.get(key, ()))
        for cancel in cancels:
            cancel.cancel(reason)
        return len(cancels)

    async def listen(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Apply the cancels published on `CHANNEL` for good; `task_status` is told once
        subscribed (a cancel published after that reaches this replica)."""
        await listen_to_channel(self.redis, CHANNEL, self._apply, task_status=task_status)

    def _apply(self, data: bytes | str) -> None:
        try:
            tenant, agent, request_id, reason = json.loads(data)
        except (TypeError, ValueError):
            return  # not ours: the channel's name is public to whoever shares the Redis
        self.cancel_here((str(tenant), str(agent), str(request_id)), str(reason))


__all__ = ["CALLER_CANCELLED", "CHANNEL", "CallKey", "InflightCalls", "call_key"]
