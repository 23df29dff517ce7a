"""`resources/subscribe` and `resources/unsubscribe` at `/mcp`, and the news of the MCP
sources relayed to the identities it concerns (`ResourceSubscriptions`, the gateway's
`SourceEvents`).

Subscriptions are per identity (tenant, agent) and live in Redis, so any replica serves any
of them; the gateway itself subscribes on the upstream (`UpstreamListener`), once per
resource whoever asks. When the upstream says a resource was updated, the replica that heard
it sends `notifications/resources/updated` (with the URI as the identity subscribed to it)
to each subscribed identity's stream (`CallerStreams`, on whatever replica holds it). A list
change of a source goes to every identity that sees the source.

Keys (each its own, no multi-key command: a Redis Cluster spreads them), each a sorted set
whose scores are the members' expiry times (unix ms):
- `conclave:mcp:sub:resource:<source>:<uri>`: `[tenant, agent, served uri]` (JSON), the
  identities subscribed to the source's resource;
- `conclave:mcp:sub:source:<source>`: the source's own URIs someone is subscribed to (the
  listener subscribes to them again whenever its session opens);
- `conclave:mcp:sub:identity:<[tenant, agent]>`: `[source, uri, served uri]`, at most
  `MAX_PER_IDENTITY` live ones (a subscription costs Redis bytes: bounded per identity);
- `conclave:mcp:updated:<source>:<uri>`: set for `COALESCE_MS` when one replica relays an
  update, so replicas that all hear it (each subscribed after a reconnect) relay it once.
  Updates of one resource closer together than that are one notification: the client
  re-reads the resource and sees the newest.

A subscription lives `TTL_S` after it was made or last kept alive, and no longer: the
identity's open streams (`GET /mcp`, `subscriptions/listen`) keep all its subscriptions
alive at each keep-alive (`keep_alive`), so one outlives neither its listener by more than
`TTL_S` nor an identity that went away (the keys carry the same expiry: nothing is left in
Redis for good). These keys are not counted in the tenant's byte quota: they are bounded
instead, per identity by count and URI size, and in time by their expiry. The upstream keeps
a resource whose last subscriber's hold ran out until the listener's session opens again
(its updates are then relayed to no one).

Only `mcp_http` sources' resources can be subscribed to: an `mcp_stdio` server runs per
call in the caller's sandbox and cannot tell anyone later that something changed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis

from gateway.gateway_error import GatewayError
from gateway.http.mcp.caller_streams import CallerStreams
from gateway.http.mcp.mcp_sources import McpSource
from gateway.http.mcp.resource_uris import resolve
from gateway.sources import UpstreamSet
from protocol import ErrorCode, Principal

MAX_PER_IDENTITY = 100
MAX_URI = 2048  # characters of a subscribed URI (it is kept in Redis)
COALESCE_MS = 100
# Four keep-alives of a stream (listen_stream.KEEPALIVE_S): a listener that misses one or two
# (a loaded replica) keeps its subscriptions; one gone for good frees them within a minute.
TTL_S = 60
_PREFIX = "conclave:mcp:"


def _subscribers_key(source: str, uri: str) -> str:
    return f"{_PREFIX}sub:resource:{source}:{uri}"


def _subscribed_key(source: str) -> str:
    return f"{_PREFIX}sub:source:{source}"


def identity_key(principal: Principal) -> str:
    return f"{_PREFIX}sub:identity:{json.dumps([principal.tenant, principal.agent])}"


def _now_ms() -> int:
    return int(time.time() * 1000)


class ResourceSubscriptions:
    def __init__(self, redis: Redis, streams: CallerStreams, upstreams: UpstreamSet) -> None:
        self.redis = redis
        self.streams = streams
        self.upstreams = upstreams

    async def subscribe(
        self, principal: Principal, sources: Sequence[McpSource], uri: str, *, on: bool = True
    ) -> dict[str, Any]:
        """Subscribe (`on`) or unsubscribe `principal` to the resource served as `uri`."""
        if len(uri) > MAX_URI:
            raise GatewayError.of(
                ErrorCode.INVALID_REQUEST, f"a subscribed URI has at most {MAX_URI} characters"
            )
        source, own = resolve(sources, uri)
        if source.kind != "mcp_http":
            raise GatewayError.of(
                ErrorCode.INVALID_REQUEST,
                f"resources of {source.kind} source {source.name!r} cannot be subscribed to:"
                " its server runs per call in your sandbox; read the resource again instead",
            )
        listener = self.upstreams.listener_of(source.name)
        member = json.dumps([principal.tenant, principal.agent, uri])
        mine = json.dumps([source.name, own, uri])
        key = identity_key(principal)
        now = _now_ms()
        if on:
            await self.redis.zremrangebyscore(key, "-inf", now)  # the expired ones
            held = await self.redis.zscore(key, mine) is not None
            if not held and await self.redis.zcard(key) >= MAX_PER_IDENTITY:
                raise GatewayError.of(
                    ErrorCode.INVALID_REQUEST,
                    f"an identity holds at most {MAX_PER_IDENTITY} subscriptions;"
                    " unsubscribe from one first",
                )
            await self._hold(key, mine, now)
            await self._hold(_subscribers_key(source.name, own), member, now)
            await self._hold(_subscribed_key(source.name), own, now)
            await listener.subscribe(own)
            return {}
        await self.redis.zrem(key, mine)
        await self.redis.zrem(_subscribers_key(source.name, own), member)
        if not await self._live(_subscribers_key(source.name, own)):
            await self.redis.zrem(_subscribed_key(source.name), own)
            await listener.subscribe(own, subscribe=False)
        return {}

    async def keep_alive(self, principal: Principal) -> None:
        """Keep every live subscription of `principal` for another `TTL_S` (its listener is
        still there): one pipelined round trip."""
        key, now = identity_key(principal), _now_ms()
        held = await self._live(key)
        if not held:
            return
        pipe = self.redis.pipeline(transaction=False)
        for raw in held:
            try:
                source, own, served = (str(part) for part in json.loads(raw))
            except (TypeError, ValueError):
                continue
            member = json.dumps([principal.tenant, principal.agent, served])
            _hold(pipe, _subscribers_key(source, own), member, now)
            _hold(pipe, _subscribed_key(source), own, now)
            _hold(pipe, key, raw, now)
        await pipe.execute()

    async def _hold(self, key: str, member: str | bytes, now: int) -> None:
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


__all__ = ["COALESCE_MS", "MAX_PER_IDENTITY", "TTL_S", "ResourceSubscriptions", "identity_key"]
