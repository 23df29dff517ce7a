"""`resources/subscribe` and `resources/unsubscribe` at `/mcp`, and the news of the MCP
sources relayed to the identities it concerns (`ResourceSubscriptions`, the gateway's
`SourceEvents`).

Subscriptions are per identity (tenant, agent) and live in Redis, so any replica serves any
of them; the gateway itself subscribes on the upstream (`UpstreamListener`), once per
resource whoever asks: one listener (one replica's session on the upstream) claims it
(`claim`), subscribes, and is the one that unsubscribes when the resource's last subscriber
is gone, whichever replica unsubscribed it or whenever its hold ran out (its `sweep`). When
the upstream says a resource was updated, the replica that heard it sends
`notifications/resources/updated` (with the URI as the identity subscribed to it) to each
subscribed identity's stream (`CallerStreams`, on whatever replica holds it). A list change
of a source goes to every identity that sees the source.

Keys (each its own, no multi-key command: a Redis Cluster spreads them), each a sorted set
whose scores are the members' expiry times (unix ms), but for the listeners' claims:
- `conclave:mcp:sub:resource:<source>:<uri>`: `[tenant, agent, served uri]` (JSON), the
  identities subscribed to the source's resource;
- `conclave:mcp:sub:source:<source>`: the source's own URIs someone is subscribed to (the
  listeners sweep it, and claim what no listener holds);
- `conclave:mcp:sub:identity:<[tenant, agent]>`: `[source, uri, served uri]`, at most
  `MAX_SUBSCRIPTIONS` live ones (a subscription costs Redis bytes: bounded per identity);
- `conclave:mcp:sub:upstream:<source>:<uri>`: a string, the id of the listener that holds
  the upstream's subscription (`upstream_claim.lua`), for `UPSTREAM_HOLD_MS` after its last
  sweep: a replica that went away leaves it to another within that;
- `conclave:mcp:updated:<source>:<uri>`: set for `COALESCE_MS` when one replica relays an
  update, so replicas that all hear it (each subscribed after a reconnect) relay it once.
  Updates of one resource closer together than that are one notification: the client
  re-reads the resource and sees the newest.

A subscription lives `TTL_S` after it was made or last kept alive, and no longer: the
identity's open streams (`GET /mcp`, `subscriptions/listen`) keep all its subscriptions
alive at each keep-alive (`keep_alive`), so one outlives neither its listener by more than
`TTL_S` nor an identity that went away (the keys carry the same expiry: nothing is left in
Redis for good). These keys are not counted in the tenant's byte quota: they are bounded
instead, per identity by count and URI size, and in time by their expiry. When the last
subscriber of an upstream's resource unsubscribes or its hold runs out, the listener that
holds the upstream's subscription sends `resources/unsubscribe` at once (it is on the replica
that unsubscribed) or at its next sweep (`upstream_events.SWEEP_S`); a later subscription
subscribes on the upstream again.

An `mcp_stdio` source's server runs in each caller's own sandbox, so a subscription to one
of its resources is that identity's server's: the gateway relays `resources/subscribe` to it
in the identity's sandbox (`StdioSources.subscribe`), and the pool keeps that sandbox for
`TTL_S` after it and watches its servers while it is idle (`tools.calls.SubscriptionHold`). What
the server then says was updated goes to that identity alone (`_StdioUpdate`, through the same
channel and coalescing as an upstream's news, with its own coalescing key). Each keep-alive of
the identity's listener subscribes the server again (`_Renewal`, once per `RENEW_MS` whichever
stream asks): the sandbox's hold is renewed with the subscription's keys, so a sandbox is held
no longer than `TTL_S` after its identity's last listener went away. When the sandbox is
recycled or torn down (its call limit, a kill, a shutdown), the next keep-alive (within
`listen_stream.KEEPALIVE_S`) subscribes the server again in a new sandbox of the identity: the
subscription goes on; what the server would have said in between is lost, as MCP allows (a
server restarted in the same sandbox is subscribed again by the runner at once). The relay of
those news and renewals is bounded: `STDIO_QUEUE` waiting (the rest dropped), `STDIO_WORKERS`
at once.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import anyio
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from redis.asyncio import Redis

from gateway.gateway_error import GatewayError
from gateway.mcp_state.caller_streams import CallerStreams
from gateway.mcp_state.mcp_sources import McpSource
from gateway.mcp_state.resource_uris import resolve
from gateway.redis_io import lua_script
from gateway.sources import StdioSources, UpstreamSet
from protocol import ErrorCode, Principal
from tools.calls import SubscriptionHold

MAX_SUBSCRIPTIONS = 100
MAX_URI = 2048  # characters of a subscribed URI (it is kept in Redis)
COALESCE_MS = 100
# Four keep-alives of a stream (listen_stream.KEEPALIVE_S): a listener that misses one or two
# (a loaded replica) keeps its subscriptions; one gone for good frees them within a minute.
TTL_S = 60
RENEW_MS = 10_000  # an identity's stdio subscription is renewed at most this often
STDIO_QUEUE = 256  # stdio news and renewals waiting to be relayed; more are dropped
STDIO_WORKERS = 8  # ... relayed at once
# A listener's claim on an upstream's subscription lasts this long after its last sweep (six
# sweeps: a loaded replica keeps it; one that went away leaves it to another within 30 s).
UPSTREAM_HOLD_MS = 30_000
_PREFIX = "conclave:mcp:"
_CLAIM = lua_script("gateway.mcp_state", "upstream_claim")
_RELEASE = lua_script("gateway.mcp_state", "upstream_release")
log = logging.getLogger("conclave.mcp")


@dataclass(frozen=True)
class _StdioUpdate:
    """An identity's stdio server said its own resource `uri` was updated."""

    identity: tuple[str, str]
    source: str
    uri: str


@dataclass(frozen=True)
class _Renewal:
    """Subscribe the identity's stdio server to its own `uri` again (a keep-alive)."""

    principal: Principal
    source: str
    uri: str


_StdioWork = _StdioUpdate | _Renewal


def _subscribers_key(source: str, uri: str) -> str:
    return f"{_PREFIX}sub:resource:{source}:{uri}"


def _subscribed_key(source: str) -> str:
    return f"{_PREFIX}sub:source:{source}"


def _upstream_key(source: str, uri: str) -> str:
    return f"{_PREFIX}sub:upstream:{source}:{uri}"


def identity_key(principal: Principal) -> str:
    return f"{_PREFIX}sub:identity:{json.dumps([principal.tenant, principal.agent])}"


def _now_ms() -> int:
    return int(time.time() * 1000)


class ResourceSubscriptions:
    def __init__(
        self,
        redis: Redis,
        streams: CallerStreams,
        upstreams: UpstreamSet,
        stdio: StdioSources | None = None,
    ) -> None:
        self.redis = redis
        self.streams = streams
        self.upstreams = upstreams
        self.stdio = stdio
        self._work: MemoryObjectSendStream[_StdioWork] | None = None  # while `run` runs
        self.dropped = 0  # stdio news and renewals dropped for a full queue
        self.renewed = 0  # stdio subscriptions subscribed again (keep-alives)
        self._claim = redis.register_script(_CLAIM.text)
        self._release = redis.register_script(_RELEASE.text)

    async def subscribe(
        self, principal: Principal, sources: Sequence[McpSource], uri: str, *, on: bool = True
    ) -> dict[str, Any]:
        """Subscribe (`on`) or unsubscribe `principal` to the resource served as `uri`."""
        if len(uri) > MAX_URI:
            raise GatewayError.of(
                ErrorCode.INVALID_REQUEST, f"a subscribed URI has at most {MAX_URI} characters"
            )
        source, own = resolve(sources, uri)
        if source.subscribe is not None:  # mcp_stdio: the server in the caller's sandbox
            await self._subscribe_stdio(principal, source, own, uri, on=on)
            return {}
        listener = self.upstreams.listener_of(source.name)
        member = json.dumps([principal.tenant, principal.agent, uri])
        mine = json.dumps([source.name, own, uri])
        key = identity_key(principal)
        now = _now_ms()
        if on:
            await self.redis.zremrangebyscore(key, "-inf", now)  # the expired ones
            held = await self.redis.zscore(key, mine) is not None
            if not held and await self.redis.zcard(key) >= MAX_SUBSCRIPTIONS:
                raise GatewayError.of(
                    ErrorCode.INVALID_REQUEST,
                    f"an identity holds at most {MAX_SUBSCRIPTIONS} subscriptions;"
                    " unsubscribe from one first",
                )
            await self._hold_key(key, mine, now)
            await self._hold_key(_subscribers_key(source.name, own), member, now)
            await self._hold_key(_subscribed_key(source.name), own, now)
            await listener.subscribe(own)
            return {}
        await self.redis.zrem(key, mine)
        await self.redis.zrem(_subscribers_key(source.name, own), member)
        if not await self._live(_subscribers_key(source.name, own)):
            await self.redis.zrem(_subscribed_key(source.name), own)
            await listener.subscribe(own, subscribe=False)
        return {}

    async def _subscribe_stdio(
        self, principal: Principal, source: McpSource, own: str, uri: str, *, on: bool
    ) -> None:
        """The identity's own server subscribed (first: a refusal leaves nothing held), and
        the identity's keys; unsubscribed likewise."""
        assert source.subscribe is not None
        member = json.dumps([principal.tenant, principal.agent, uri])
        mine = json.dumps([source.name, own, uri])
        key, subscribers = identity_key(principal), _subscribers_key(source.name, own)
        if not on:
            await self.redis.zrem(key, mine)
            await self.redis.zrem(subscribers, member)
            await source.send("resources/unsubscribe", {"uri": own})
            return
        now = _now_ms()
        await self.redis.zremrangebyscore(key, "-inf", now)  # the expired ones
        held = await self.redis.zscore(key, mine) is not None
        if not held and await self.redis.zcard(key) >= MAX_SUBSCRIPTIONS:
            raise GatewayError.of(
                ErrorCode.INVALID_REQUEST,
                f"an identity holds at most {MAX_SUBSCRIPTIONS} subscriptions;"
                " unsubscribe from one first",
            )
        await source.subscribe(own, self._hold(principal))
        await self._hold_key(key, mine, now)
        await self._hold_key(subscribers, member, now)

    def _hold(self, principal: Principal) -> SubscriptionHold:
        return SubscriptionHold(TTL_S, partial(self._heard, (principal.tenant, principal.agent)))

    def _heard(self, identity: tuple[str, str], source: str, message: dict[str, Any]) -> None:
        """What an identity's stdio server notified (from its sandbox; must not block)."""
        params = message.get("params")
        uri = params.get("uri") if isinstance(params, dict) else None
        if message.get("method") != _UPDATED or not isinstance(uri, str) or len(uri) > MAX_URI:
            return
        self._queue(_StdioUpdate(identity, source, uri))

    def _queue(self, work: _StdioWork) -> None:
        try:
            if self._work is None:
                raise anyio.WouldBlock
            self._work.send_nowait(work)
        except (anyio.WouldBlock, anyio.ClosedResourceError):
            self.dropped += 1

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Relay the stdio servers' news and renew their subscriptions, until cancelled."""
        send, receive = anyio.create_memory_object_stream[_StdioWork](STDIO_QUEUE)
        async with send, receive, anyio.create_task_group() as workers:
            for _ in range(STDIO_WORKERS):
                workers.start_soon(self._worker, receive.clone())
            self._work = send
            task_status.started()

    async def _worker(self, work: MemoryObjectReceiveStream[_StdioWork]) -> None:
        async with work:
            async for item in work:
                try:
                    if isinstance(item, _StdioUpdate):
                        await self._stdio_updated(item)
                    else:
                        await self._renew(item)
                except Exception:  # one relay's failure; the subscription's next keep-alive
                    log.warning("stdio subscription work failed: %r", item, exc_info=True)

    async def _stdio_updated(self, update: _StdioUpdate) -> None:
        """Tell the identity, if it is still subscribed, as it named the resource."""
        tenant, agent = update.identity
        coalesced = f"{_PREFIX}updated:{update.source}:{json.dumps(update.identity)}:{update.uri}"
        if not await self.redis.set(coalesced, 1, nx=True, px=COALESCE_MS):
            return
        for raw in await self._live(_subscribers_key(update.source, update.uri)):
            try:
                who_tenant, who_agent, served = json.loads(raw)
            except (TypeError, ValueError):
                continue
            if (who_tenant, who_agent) == (tenant, agent):
                message = _notification(_UPDATED, {"uri": served})
                await self.streams.to_identity(update.identity, update.source, message)

    async def _renew(self, renewal: _Renewal) -> None:
        server = self.stdio.servers.get(renewal.source) if self.stdio is not None else None
        if self.stdio is None or server is None or not server.source.visible_to(renewal.principal):
            return
        hold = self._hold(renewal.principal)
        await self.stdio.subscribe(renewal.principal, server, renewal.uri, hold)
        self.renewed += 1

    async def _renew_stdio(self, principal: Principal, source: str, own: str) -> None:
        """Queue a renewal of a stdio subscription, once per `RENEW_MS` whoever asks."""
        if self.stdio is None or source not in self.stdio.servers:
            return
        identity = json.dumps([principal.tenant, principal.agent])
        key = f"{_PREFIX}renewed:{source}:{identity}:{own}"
        if await self.redis.set(key, 1, nx=True, px=RENEW_MS):
            self._queue(_Renewal(principal, source, own))

    async def keep_alive(self, principal: Principal) -> None:
        """Keep every live subscription of `principal` for another `TTL_S` (its listener is
        still there): one pipelined round trip."""
        key, now = identity_key(principal), _now_ms()
        held = await self._live(key)
        if not held:
            return
        pipe = self.redis.pipeline(transaction=False)
        stdio: list[tuple[str, str]] = []  # its stdio subscriptions, renewed in their sandbox
        for raw in held:
            try:
                source, own, served = (str(part) for part in json.loads(raw))
            except (TypeError, ValueError):
                continue
            member = json.dumps([principal.tenant, principal.agent, served])
            _hold(pipe, _subscribers_key(source, own), member, now)
            if self.stdio is not None and source in self.stdio.servers:
                stdio.append((source, own))
            else:
                _hold(pipe, _subscribed_key(source), own, now)
            _hold(pipe, key, raw, now)
        await pipe.execute()
        for source, own in stdio:
            await self._renew_stdio(principal, source, own)

    async def _hold_key(self, key: str, member: str | bytes, now: int) -> None:
        pipe = self.redis.pipeline(transaction=False)
        _hold(pipe, key, member, now)
        await pipe.execute()

    async def _live(self, key: str) -> list[str]:
        """The members of `key` whose hold has not run out."""
        found = await self.redis.zrangebyscore(key, _now_ms(), "+inf")
        return [m.decode() if isinstance(m, bytes) else str(m) for m in found]

    # SourceEvents: what the upstream listeners hear

    async def subscribed(self, source: str) -> list[str]:
        return sorted(await self._live(_subscribed_key(source)))

    async def claim(self, source: str, uri: str, listener: str) -> bool:
        keys = _CLAIM.keys(owner=_upstream_key(source, uri))
        argv = _CLAIM.argv(listener=listener, hold_ms=UPSTREAM_HOLD_MS)
        return bool(await self._claim(keys=keys, args=argv))

    async def release(self, source: str, uri: str, listener: str) -> None:
        keys = _RELEASE.keys(owner=_upstream_key(source, uri))
        await self._release(keys=keys, args=_RELEASE.argv(listener=listener))

    async def resource_updated(self, source: str, uri: str) -> None:
        first = await self.redis.set(f"{_PREFIX}updated:{source}:{uri}", 1, nx=True, px=COALESCE_MS)
        if not first:
            return  # another replica relays this one
        members = await self._live(_subscribers_key(source, uri))
        if not members:  # its last subscriber's hold ran out
            await self.redis.zrem(_subscribed_key(source), uri)
            return
        for raw in members:
            try:
                tenant, agent, served = json.loads(raw)
            except (TypeError, ValueError):
                continue
            message = _notification(_UPDATED, {"uri": served})
            await self.streams.to_identity((str(tenant), str(agent)), source, message)

    async def list_changed(self, source: str, kind: str) -> None:
        method = f"notifications/{kind}/list_changed"
        key = f"{_PREFIX}changed:{source}:{kind}"
        first = await self.redis.set(key, 1, nx=True, px=COALESCE_MS)
        if first:
            await self.streams.to_viewers(source, _notification(method, None))


_UPDATED = "notifications/resources/updated"


def _hold(pipe: Any, key: str, member: str | bytes, now: int) -> None:
    """`member` of `key` until `TTL_S` from `now` (GT: a replica whose clock lags never
    shortens another's hold), and the key itself as long as its latest hold."""
    pipe.zadd(key, {member: now + TTL_S * 1000}, gt=True)
    pipe.pexpire(key, TTL_S * 1000)


def _notification(method: str, params: dict[str, Any] | None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return message


__all__ = [
    "COALESCE_MS",
    "MAX_SUBSCRIPTIONS",
    "TTL_S",
    "UPSTREAM_HOLD_MS",
    "ResourceSubscriptions",
    "identity_key",
]
