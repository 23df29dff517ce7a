"""Resource subscriptions in Redis expire `TTL_S` after they were made or last kept alive:
an open stream's keep-alive (`ResourceSubscriptions.keep_alive`) renews every live
subscription of its identity, and one whose hold ran out is neither renewed nor relayed to
(tests/e2e/test_mcp_notifications_e2e.py checks the expiry through real replicas)."""

from __future__ import annotations

import json
import time

import pytest
from redis.asyncio import Redis

from gateway.mcp_state import CallerStreams, ResourceSubscriptions
from gateway.mcp_state.subscriptions import TTL_S, identity_key
from gateway.sources import UpstreamSet
from protocol import Principal
from tools import ToolRegistry

pytestmark = pytest.mark.anyio


def _principal(agent: str) -> Principal:
    expires = int(time.time()) + 60
    return Principal(tenant="t", agent=agent, scopes=("tool:*",), expires_at=expires, token_id="x")


async def test_a_listeners_keep_alive_renews_its_live_subscriptions_only(redis: Redis) -> None:
    subscriptions = ResourceSubscriptions(
        redis, CallerStreams(redis, lambda *_: True), UpstreamSet((), ToolRegistry())
    )
    ada = _principal("ada")
    now_ms = int(time.time() * 1000)
    live = json.dumps(["src", "a://live", "a://live"])
    gone = json.dumps(["src", "a://gone", "a://gone"])
    await redis.zadd(identity_key(ada), {live: now_ms + 1000, gone: now_ms - 1})
    await subscriptions.keep_alive(ada)

    renewed = await redis.zscore(identity_key(ada), live)
    assert renewed is not None and renewed >= now_ms + TTL_S * 1000
    assert await redis.zscore(identity_key(ada), gone) == now_ms - 1  # ran out: not renewed
    assert await subscriptions.subscribed("src") == ["a://live"]
    for key in await redis.keys("conclave:mcp:sub*"):
        assert 0 < await redis.pttl(key) <= TTL_S * 1000, key
