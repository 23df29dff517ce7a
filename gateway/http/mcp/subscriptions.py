"""`resources/subscribe` and `resources/unsubscribe` at `/mcp`, and the news of the MCP
sources relayed to the identities it concerns (`ResourceSubscriptions`, the gateway's
`SourceEvents`).

Subscriptions are per identity (tenant, agent) and live in Redis, so any replica serves any
of them; the gateway itself subscribes on the upstream (`UpstreamListener`), once per
resource whoever asks. When the upstream says a resource was updated, the replica that heard
it sends `notifications/resources/updated` (with the URI as the identity subscribed to it)
to each subscribed identity's stream (`CallerStreams`, on whatever replica holds it). A list
change of a source goes to every identity that sees the source.

Keys (each its own, no multi-key command: a Redis Cluster spreads them):
- `conclave:mcp:subscribers:<source>:<uri>`: set of `[tenant, agent, served uri]` (JSON);
- `conclave:mcp:subscribed:<source>`: set of the source's own URIs someone subscribed to
  (the listener subscribes to them again whenever its session opens);
- `conclave:mcp:subscriptions:<[tenant, agent]>`: set of `[source, uri, served uri]`, at most
  `MAX_PER_IDENTITY` (a subscription costs Redis bytes: bounded per identity);
- `conclave:mcp:updated:<source>:<uri>`: set for `COALESCE_MS` when one replica relays an
  update, so replicas that all hear it (each subscribed after a reconnect) relay it once.
  Updates of one resource closer together than that are one notification: the client
  re-reads the resource and sees the newest.

Only `mcp_http` sources' resources can be subscribed to: an `mcp_stdio` server runs per
call in the caller's sandbox and cannot tell anyone later that something changed.
"""

from __future__ import annotations

import json
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
_PREFIX = "conclave:mcp:"


def _subscribers_key(source: str, uri: str) -> str:
    return f"{_PREFIX}subscribers:{source}:{uri}"


def _subscribed_key(source: str) -> str:
    return f"{_PREFIX}subscribed:{source}"


def _identity_key(principal: Principal) -> str:
    return f"{_PREFIX}subscriptions:{json.dumps([principal.tenant, principal.agent])}"


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
        if on:
            held = await self.redis.smembers(_identity_key(principal))
            if mine.encode() not in held and len(held) >= MAX_PER_IDENTITY:
                raise GatewayError.of(
                    ErrorCode.INVALID_REQUEST,
                    f"an identity holds at most {MAX_PER_IDENTITY} subscriptions;"
                    " unsubscribe from one first",
                )
            await self.redis.sadd(_identity_key(principal), mine)
            await self.redis.sadd(_subscribers_key(source.name, own), member)
            await self.redis.sadd(_subscribed_key(source.name), own)
            await listener.subscribe(own)
            return {}
        await self.redis.srem(_identity_key(principal), mine)
        await self.redis.srem(_subscribers_key(source.name, own), member)
        if not await self.redis.scard(_subscribers_key(source.name, own)):
            await self.redis.srem(_subscribed_key(source.name), own)
            await listener.subscribe(own, subscribe=False)
        return {}

    # SourceEvents: what the upstream listeners hear

    async def subscribed(self, source: str) -> list[str]:
        found = await self.redis.smembers(_subscribed_key(source))
        return sorted(uri.decode() if isinstance(uri, bytes) else str(uri) for uri in found)

    async def resource_updated(self, source: str, uri: str) -> None:
        first = await self.redis.set(f"{_PREFIX}updated:{source}:{uri}", 1, nx=True, px=COALESCE_MS)
        if not first:
            return  # another replica relays this one
        members = await self.redis.smembers(_subscribers_key(source, uri))
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


def _notification(method: str, params: dict[str, Any] | None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return message


__all__ = ["COALESCE_MS", "MAX_PER_IDENTITY", "ResourceSubscriptions"]
