"""The gateway's own subscription on an `mcp_http` upstream follows what identities hold:
one `resources/subscribe` whoever asks through whichever replica, and one
`resources/unsubscribe` when the last subscriber of the resource is gone (it unsubscribed
through either replica, or its hold ran out with no stream keeping it), sent by the replica
whose session subscribed; a later subscription subscribes again. A replica that shuts down
gives its upstream subscriptions up, and another subscribes them at its next sweep.

Two gateways in-process on one Redis (two replicas), the resource upstream
(`resource_upstream.py`) in its own process, whose `subscription_log` tool says what it
received; the official `mcp` client through each gateway.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import warnings
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import MCPDeprecationWarning
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from pydantic import HttpUrl
from redis.asyncio import Redis

from conclave.bench.core.child_server import wait_listening
from conclave.stack.ports import free_port
from gateway.assembly import create_app
from gateway.config import Settings
from gateway.http.gateway_parts import gateway_parts
from gateway.identity.tokens import issue_token
from gateway.sources import UpstreamListener
from tests.helpers import until
from tools.sources import McpHttpSource

pytestmark = pytest.mark.anyio

SERVER = Path(__file__).with_name("resource_upstream.py")
SUBSCRIBE, UNSUBSCRIBE = "resources/subscribe", "resources/unsubscribe"


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    """The resource upstream (label `a`): its MCP URL."""
    port = free_port()
    argv = [sys.executable, str(SERVER), "--port", str(port), "--label", "a"]
    child = subprocess.Popen(argv)
    try:
        wait_listening(port, child, 30, "the resource upstream")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        child.terminate()
        with suppress(subprocess.TimeoutExpired):
            child.wait(10)


@asynccontextmanager
async def _replica(settings: Settings, url: str) -> AsyncIterator[Any]:
    """A gateway serving the upstream as `a`, once its listener's session is open."""
    app = create_app(settings, sources=[McpHttpSource(kind="mcp_http", name="a", url=HttpUrl(url))])
    async with app.router.lifespan_context(app):
        upstreams = gateway_parts(app).mcp_catalog.upstreams
        await until(lambda: _listener(app) is not None and _listener(app).session is not None, 30)
        assert upstreams.listeners["a"].offers_subscriptions
        yield app


def _listener(app: Any) -> UpstreamListener:
    return gateway_parts(app).mcp_catalog.upstreams.listeners.get("a")  # type: ignore[return-value]


@asynccontextmanager
async def _client(app: Any, settings: Settings, agent: str) -> AsyncIterator[Client]:
    token = issue_token(settings, tenant="subs", agent=agent, scopes=["tool:a.*", "tool:a__*"])
    http = httpx2.AsyncClient(
        transport=httpx2.ASGITransport(app=app),
        base_url="http://gateway",
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    transport = streamable_http_client("http://gateway/mcp", http_client=http)
    async with http, Client(transport, mode="legacy") as client:
        yield client


async def _subscribe(client: Client, uri: str, *, on: bool = True) -> None:
    with warnings.catch_warnings():  # deprecated in 2026-07-28, served in the handshake era
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        if on:
            await client.subscribe_resource(uri)
        else:
            await client.unsubscribe_resource(uri)


async def _log(client: Client, uri: str) -> list[str]:
    """What the upstream received for `uri`: its subscribes and unsubscribes, in order."""
    answer = await client.call_tool("a__subscription_log", {"uri": uri})
    assert not answer.is_error, answer
    return list(json.loads(answer.content[0].text))  # type: ignore[union-attr]


async def _until_logged(client: Client, uri: str, expected: list[str], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while (logged := await _log(client, uri)) != expected:
        assert time.monotonic() < deadline, f"the upstream received {logged}, not {expected}"
        await anyio.sleep(0.2)  # the upstream is asked again: nothing here to await on


@pytest.fixture
async def replicas(settings: Settings, redis: Redis, upstream: str) -> AsyncIterator[list[Any]]:
    async with _replica(settings, upstream) as first, _replica(settings, upstream) as second:
        yield [first, second]


async def test_the_last_unsubscribe_through_either_replica_unsubscribes_upstream_once(
    replicas: list[Any], settings: Settings
) -> None:
    """ada subscribes through one replica, bob through the other: the upstream is subscribed
    once. ada unsubscribes: bob still holds it, nothing is sent. bob unsubscribes through
    the replica that did not subscribe: the upstream is unsubscribed once, by the other."""
    uri = "a://items/11"
    first, second = replicas
    async with AsyncExitStack() as stack:
        ada = await stack.enter_async_context(_client(first, settings, "ada"))
        bob = await stack.enter_async_context(_client(second, settings, "bob"))
        await _subscribe(ada, uri)
        await _subscribe(bob, uri)
        assert await _log(ada, uri) == [SUBSCRIBE]  # once, whoever asks
        await _subscribe(ada, uri, on=False)
        for replica in replicas:
            await _listener(replica).sweep()
        assert await _log(ada, uri) == [SUBSCRIBE]  # bob still holds it
        await _subscribe(bob, uri, on=False)
        await _until_logged(bob, uri, [SUBSCRIBE, UNSUBSCRIBE], 20)  # the holder's sweep
        for replica in replicas:  # every replica sweeps: still one unsubscribe
            await _listener(replica).sweep()
        assert await _log(bob, uri) == [SUBSCRIBE, UNSUBSCRIBE]

        await _subscribe(bob, uri)  # a later subscription subscribes again
        assert await _log(bob, uri) == [SUBSCRIBE, UNSUBSCRIBE, SUBSCRIBE]


async def test_a_subscription_whose_hold_ran_out_is_unsubscribed_upstream_once(
    replicas: list[Any], settings: Settings, redis: Redis
) -> None:
    """cy subscribes and no stream keeps the subscription: when its hold runs out (here:
    moved to the past, as `TTL_S` would), the upstream is unsubscribed once, at a sweep;
    subscribing again through the other replica subscribes again."""
    uri = "a://items/12"
    first, second = replicas
    async with _client(first, settings, "cy") as cy, _client(second, settings, "cy") as again:
        await _subscribe(cy, uri)
        assert await _log(cy, uri) == [SUBSCRIBE]
        past = int(time.time() * 1000) - 1
        async for key in redis.scan_iter(match="conclave:mcp:sub:*"):
            if await redis.type(key) in (b"zset", "zset"):
                members = await redis.zrange(key, 0, -1)
                await redis.zadd(key, dict.fromkeys(members, past), xx=True)
        await _until_logged(cy, uri, [SUBSCRIBE, UNSUBSCRIBE], 20)  # the periodic sweep
        for replica in replicas:
            await _listener(replica).sweep()
        assert await _log(cy, uri) == [SUBSCRIBE, UNSUBSCRIBE]

        await _subscribe(again, uri)
        assert await _log(again, uri) == [SUBSCRIBE, UNSUBSCRIBE, SUBSCRIBE]


async def test_a_replica_that_goes_away_leaves_its_upstream_subscriptions_to_another(
    settings: Settings, redis: Redis, upstream: str
) -> None:
    """The replica whose session subscribed shuts down, dee still subscribed: the other
    replica subscribes on the upstream at its next sweep (its news is heard again)."""
    uri = "a://items/13"
    async with _replica(settings, upstream) as staying, _client(staying, settings, "dee") as dee:
        async with (
            _replica(settings, upstream) as leaving,
            _client(leaving, settings, "dee") as through_leaving,
        ):
            await _subscribe(through_leaving, uri)
            assert await _log(dee, uri) == [SUBSCRIBE]
        await _until_logged(dee, uri, [SUBSCRIBE, SUBSCRIBE], 20)  # the staying one's sweep
