"""`ClientRequests`: the requests a call's servers send its calling client, and the client's
answers, POSTed back to any replica, routed to the replica whose call waits for them.

A server's request during a call (sampling, elicitation, roots: `tools.calls.CallEvents.request`)
goes to the client on the call's event stream under an id the gateway issues (`issue`), never
the server's own: `conclave-<nonce>.<mac>`, where the MAC (HMAC-SHA256 with a key derived
from the gateway's secret) binds the nonce to the caller's identity (tenant, agent). So any
replica can tell, without a look-up, whether a POSTed response answers a request issued to
the identity that sent it (`issued_to`); one that does not is refused there and then, and one
identity can never answer another's request. An accepted answer is published on one Redis
pub/sub channel (`CHANNEL`); the replica that holds the waiting call (`waiting`) hands it
over. An answer nobody waits for (the call ended, or it came twice) is dropped, as is one
published while no replica listens: the call's request then ends at its own deadline.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Iterator
from contextlib import contextmanager

import anyio
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from redis.asyncio import Redis

from gateway.redis_io import listen_to_channel
from protocol import Principal

CHANNEL = "conclave:mcp:answers"  # pub/sub: [tenant, agent, request id, response]
ID_PREFIX = "conclave-"
_MAC_CHARS = 32  # 128 bits of HMAC-SHA256, hex

Identity = tuple[str, str]


class ClientRequests:
    def __init__(self, redis: Redis, secret: bytes) -> None:
        self.redis = redis
        self._key = hmac.new(secret, b"conclave: ids of requests to clients", "sha256").digest()
        self._waiting: dict[str, tuple[Identity, MemoryObjectSendStream[object]]] = {}

    def __len__(self) -> int:
        return len(self._waiting)

    def issue(self, principal: Principal) -> str:
        """A new request id, for `principal`'s client alone."""
        nonce = secrets.token_urlsafe(16)
        return f"{ID_PREFIX}{nonce}.{self._mac(principal, nonce)}"

    def issued_to(self, principal: Principal, request_id: object) -> bool:
        """Whether `request_id` is one `issue` gave out for `principal`."""
        if not isinstance(request_id, str) or not request_id.startswith(ID_PREFIX):
            return False
        nonce, _, mac = request_id.removeprefix(ID_PREFIX).partition(".")
        return hmac.compare_digest(mac.encode(), self._mac(principal, nonce).encode())

    def _mac(self, principal: Principal, nonce: str) -> str:
        signed = "\0".join((principal.tenant, principal.agent, nonce)).encode()
        return hmac.new(self._key, signed, hashlib.sha256).hexdigest()[:_MAC_CHARS]

    @contextmanager
    def waiting(
        self, principal: Principal, request_id: str
    ) -> Iterator[MemoryObjectReceiveStream[object]]:
        """The answer to `request_id` (from any replica) arrives on the stream while the block
        runs."""
        send, receive = anyio.create_memory_object_stream[object](1)
        self._waiting[request_id] = ((principal.tenant, principal.agent), send)
        try:
            with receive:
                yield receive
        finally:
            self._waiting.pop(request_id, None)
            send.close()

    async def answer(self, principal: Principal, request_id: str, response: object) -> None:
        """Hand `response` to the call waiting for `request_id`, wherever it runs (one
        PUBLISH); the caller has checked `issued_to`."""
        identity = [principal.tenant, principal.agent]
        await self.redis.publish(CHANNEL, json.dumps([*identity, request_id, response]))

    def answer_here(self, identity: Identity, request_id: str, response: object) -> bool:
        """Hand `response` to the call on this replica waiting for `request_id`, if any waits
        and it is the identity's; whether one took it."""
        waiting = self._waiting.pop(request_id, None)
        if waiting is None:
            return False
        owner, send = waiting
        if owner != identity:  # not reachable through `answer`: `issued_to` binds the id
            self._waiting[request_id] = waiting
            return False
        try:
            send.send_nowait(response)
        except (anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
            return False
        return True

    async def listen(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Hand over the answers published on `CHANNEL` for good; `task_status` is told once
        subscribed."""
        await listen_to_channel(self.redis, CHANNEL, self._apply, task_status=task_status)

    def _apply(self, data: bytes | str) -> None:
        try:
            tenant, agent, request_id, response = json.loads(data)
        except (TypeError, ValueError):
            return  # not ours: the channel's name is public to whoever shares the Redis
        if isinstance(request_id, str):
            self.answer_here((str(tenant), str(agent)), request_id, response)


__all__ = ["CHANNEL", "ID_PREFIX", "ClientRequests"]
