"""News from an `mcp_http` upstream reaches the right callers' `GET /mcp` streams (and, on
MCP 2026-07-28, their `subscriptions/listen` streams), through two gateway processes on one
Redis, with the official `mcp` client.

The upstream (`tests/gateway/sources/resource_upstream.py`, label `a`) tells its subscribed sessions
when a resource changes (its tool `touch`) and every session when its tool list changes (its
tool `drop`). A caller that subscribed gets `notifications/resources/updated` on its stream,
another identity does not, an unsubscribed caller no longer does; an update heard by one
gateway reaches a stream held by the other; a dropped tool is announced, withdrawn from
`tools/list` and refused. A 2026-07-28 client listening on one gateway hears an update and a
list change made through the other, each tagged with its subscription, and only the kinds it
asked for.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
import warnings
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import MCPDeprecationWarning, types
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ResourceUpdated, ServerEvent, Subscription, ToolsListChanged

from conclave.bench.core.child_server import wait_listening
from conclave.stack import EmbeddedStack
from conclave.stack.ports import free_port
from gateway.config import Settings
from gateway.identity.tokens import issue_token
from gateway.mcp_state.subscriptions import TTL_S
from gateway.redis_io import connect_redis
from tests.helpers import until

pytestmark = pytest.mark.anyio

SERVER = Path(__file__).resolve().parents[1] / "gateway" / "sources" / "resource_upstream.py"
SECRETS = {"secret": "notify-secret-" + "n" * 32, "admin_key": "notify-admin-key"}
README = "notes://readme"
STATUS = "a://status"


class Upstream:
    """The resource upstream in its own process, on one port across restarts."""

    def __init__(self) -> None:
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        argv = [sys.executable, str(SERVER), "--port", str(self.port), "--label", "a"]
        self.process = subprocess.Popen(argv)
        wait_listening(self.port, self.process, 30, "the resource upstream")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            with suppress(subprocess.TimeoutExpired):
                self.process.wait(10)

    def restart(self) -> None:
        self.stop()
        self.start()


@dataclass
class Replicas:
    urls: list[str]
    upstream: Upstream


@pytest.fixture(scope="module")
def replicas(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replicas]:
    """The upstream, and two gateway processes serving it on one Redis."""
    upstream = Upstream()
    config = tmp_path_factory.mktemp("notify") / "conclave.toml"
    config.write_text(
        f'[[source]]\nname = "a"\nkind = "mcp_http"\nurl = "http://127.0.0.1:{upstream.port}/mcp"\n'
    )
    try:
        upstream.start()
        settings = Settings(
            redis_url=redis_url, port=0, sandbox_backend="process", config=config, **SECRETS
        )
        with EmbeddedStack(settings) as first, EmbeddedStack(settings) as second:
            yield Replicas([first.url, second.url], upstream)
    finally:
        upstream.stop()


def _token(agent: str) -> str:
    return issue_token(
        Settings(**SECRETS), tenant="news", agent=agent, scopes=("tool:a.*", "tool:a__*")
    )


@dataclass
class Caller:
    client: Client
    agent: str
    heard: list[Any] = field(default_factory=list)

    def updated(self) -> list[str]:
        updates = [m for m in self.heard if isinstance(m, types.ResourceUpdatedNotification)]
        return [str(m.params.uri) for m in updates]

    async def subscribe(self, uri: str, *, on: bool = True) -> None:
        with warnings.catch_warnings():  # deprecated in 2026-07-28, served in the handshake era
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            if on:
                await self.client.subscribe_resource(uri)
            else:
                await self.client.unsubscribe_resource(uri)

    async def touch(self, uri: str) -> None:
        answer = await self.client.call_tool("a__touch", {"uri": uri})
        assert not answer.is_error, answer

    async def until_heard(self, uri: str, count: int = 1, *, touching: bool = True) -> None:
        """Until `count` updates of `uri` have arrived, touching it meanwhile (the GET
        stream opens in the background after `initialize`: news before that is lost)."""
        with anyio.fail_after(20):
            while self.updated().count(uri) < count:
                if touching:
                    await self.touch(uri)
                with suppress(TimeoutError):  # not yet: touch it again
                    await until(lambda: self.updated().count(uri) >= count, 0.3)


async def _names(client: Client) -> set[str]:
    return {t.name for t in (await client.list_tools()).tools}


@asynccontextmanager
async def _caller(url: str, agent: str) -> AsyncIterator[Caller]:
    heard: list[Any] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ServerNotification | Exception):
            heard.append(message)

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {_token(agent)}"}, timeout=30)
    transport = streamable_http_client(f"{url}/mcp", http_client=http)
    async with http, Client(transport, mode="legacy", message_handler=on_message) as client:
        yield Caller(client, agent, heard)


async def test_a_subscriber_hears_updates_on_its_stream_and_no_one_else_does(
    replicas: Replicas,
) -> None:
    async with AsyncExitStack() as stack:
        ada = await stack.enter_async_context(_caller(replicas.urls[0], "ada"))
        bob = await stack.enter_async_context(_caller(replicas.urls[0], "bob"))
        caps = ada.client.server_capabilities.resources
        assert caps is not None and caps.subscribe and caps.list_changed
        await ada.subscribe(README)
        await bob.subscribe(STATUS)
        await ada.until_heard(README)  # touches README until ada's stream has it
        await bob.until_heard(STATUS)  # published after README's: the channel keeps order
        assert README not in bob.updated()  # bob never subscribed to it
        assert STATUS not in ada.updated()

        await ada.subscribe(STATUS)
        await ada.subscribe(README, on=False)
        heard_before = ada.updated().count(README)
        await ada.touch(README)
        await ada.until_heard(STATUS, 1)
        assert ada.updated().count(README) == heard_before  # unsubscribed: not told


async def test_an_update_heard_by_one_gateway_reaches_a_stream_held_by_the_other(
    replicas: Replicas,
) -> None:
    first, second = replicas.urls
    async with _caller(second, "cyd") as cyd:  # cyd's stream is held by the second gateway
        subscribe = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "resources/subscribe",
            "params": {"uri": "a://items/9"},
        }
        headers = {"Authorization": f"Bearer {_token('cyd')}"}
        async with httpx.AsyncClient(base_url=first, headers=headers, timeout=30) as http:
            answer = await http.post("/mcp", json=subscribe)  # the first gateway subscribes
            assert answer.json() == {"jsonrpc": "2.0", "id": 1, "result": {}}, answer.text
            touch = {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "a__touch", "arguments": {"uri": "a://items/9"}},
            }
            with anyio.fail_after(20):
                while "a://items/9" not in cyd.updated():
                    told = await http.post("/mcp", json=touch)  # the upstream tells the first
                    assert told.json()["result"]["structuredContent"] == {"result": 1}
                    with suppress(TimeoutError):  # not yet: touch it again
                        await until(lambda: "a://items/9" in cyd.updated(), 0.3)


async def test_a_tool_the_upstream_drops_is_announced_withdrawn_and_refused(
    replicas: Replicas,
) -> None:
    async with _caller(replicas.urls[1], "dee") as dee:
        await dee.subscribe(STATUS)
        await dee.until_heard(STATUS)  # dee's stream is open
        names = {t.name for t in (await dee.client.list_tools()).tools}
        assert "a__victim" in names
        dropped = await dee.client.call_tool("a__drop", {"name": "victim"})
        assert not dropped.is_error, dropped
        await until(
            lambda: any(isinstance(m, types.ToolListChangedNotification) for m in dee.heard), 20
        )
        for url in replicas.urls:  # each gateway withdrew it (each heard the upstream itself)
            async with _caller(url, "eve") as eve:
                with anyio.fail_after(20):
                    while "a__victim" in (names := await _names(eve.client)):  # noqa: ASYNC110
                        await anyio.sleep(0.05)  # (another gateway's state: no event to await)
                assert "a__echo" in names
                refused = await eve.client.call_tool("a__victim", {})
                assert refused.is_error and refused.structured_content is not None
                assert refused.structured_content["code"] == "TOOL_NOT_FOUND"


async def test_a_subscription_outlives_an_upstream_restart(replicas: Replicas) -> None:
    """The restarted upstream forgot every session: the next call through the gateway
    succeeds at once (a new session, inline), and the gateway's listener subscribes again."""
    async with _caller(replicas.urls[0], "fay") as fay:
        await fay.subscribe("a://items/3")
        await fay.until_heard("a://items/3")
        replicas.upstream.restart()
        await fay.touch("a://items/3")  # not UPSTREAM_UNAVAILABLE: touch checks is_error
        await fay.until_heard("a://items/3", 2)


@asynccontextmanager
async def _modern(url: str, agent: str) -> AsyncIterator[Client]:
    """The official client on MCP 2026-07-28 (discovered: no handshake) as `agent`."""
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {_token(agent)}"}, timeout=30)
    transport = streamable_http_client(f"{url}/mcp", http_client=http)
    async with http, Client(transport) as client:
        assert client.protocol_version == "2026-07-28"
        yield client


async def _heard(subscription: Subscription, into: list[ServerEvent]) -> None:
    async for event in subscription:
        into.append(event)


async def test_a_2026_listener_hears_an_update_and_a_list_change_made_through_the_other_replica(
    replicas: Replicas,
) -> None:
    first, second = replicas.urls
    item, grown = "a://items/21", f"grown{uuid.uuid4().hex[:6]}"
    async with _modern(second, "gus") as gus, _modern(first, "gus") as via_first:
        caps = gus.server_capabilities  # as server/discover answered them
        assert caps.tools is not None and caps.tools.list_changed  # now said: listen serves it
        assert caps.resources is not None and caps.resources.subscribe
        listening = gus.listen(
            resource_subscriptions=[item, "nowhere://x"], tools_list_changed=True
        )
        narrow = gus.listen(prompts_list_changed=True)  # asks for prompt changes only
        async with listening as subscription, narrow as prompts_only:
            # What the gateway honours: a URI no source serves is left out of the ack.
            assert subscription.honored.resource_subscriptions == [item]
            assert subscription.honored.tools_list_changed
            events: list[ServerEvent] = []
            elsewhere: list[ServerEvent] = []
            async with anyio.create_task_group() as listening_tasks:
                listening_tasks.start_soon(_heard, subscription, events)
                listening_tasks.start_soon(_heard, prompts_only, elsewhere)
                with anyio.fail_after(20):
                    while ResourceUpdated(item) not in events:
                        touched = await via_first.call_tool("a__touch", {"uri": item})
                        assert not touched.is_error, touched
                        with suppress(TimeoutError):  # not yet: touch it again
                            await until(lambda: ResourceUpdated(item) in events, 0.3)
                grew = await via_first.call_tool("a__grow", {"name": grown})
                assert not grew.is_error, grew
                await until(lambda: ToolsListChanged() in events, 20)
                listening_tasks.cancel_scope.cancel()
        assert elsewhere == []  # no tool change nor update on a prompts-only stream
        assert f"a__{grown}" in await _names(gus)  # the change it was told of


async def test_a_2026_listen_stream_tags_its_frames_and_ends_gracefully_at_token_expiry(
    replicas: Replicas,
) -> None:
    """On the wire: the acknowledgment first, every frame with the request's id as its
    subscription id, and the revision's graceful close (a result) when the token expires."""
    token = issue_token(
        Settings(**SECRETS), tenant="news", agent="hal", scopes=("tool:a.*",), ttl_s=3
    )
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    params = {"_meta": meta, "notifications": {"resourcesListChanged": True}}
    message = {"jsonrpc": "2.0", "id": "sub-7", "method": "subscriptions/listen", "params": params}
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "subscriptions/listen",
    }
    async with httpx.AsyncClient(timeout=30) as http:
        with anyio.fail_after(20):
            answer = await http.post(f"{replicas.urls[0]}/mcp", json=message, headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/event-stream")
    frames = [json.loads(line[5:]) for line in answer.text.splitlines() if line.startswith("data:")]
    ack, closed = frames[0], frames[-1]
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"] == {
        "_meta": {"io.modelcontextprotocol/subscriptionId": "sub-7"},
        "notifications": {"resourcesListChanged": True},
    }
    assert closed == {
        "jsonrpc": "2.0",
        "id": "sub-7",
        "result": {
            "resultType": "complete",
            "_meta": {"io.modelcontextprotocol/subscriptionId": "sub-7"},
        },
    }


async def test_subscriptions_held_in_redis_expire_unless_a_listener_keeps_them(
    replicas: Replicas, redis_url: str
) -> None:
    """Every subscription key, made on either era, carries an expiry of at most
    `TTL_S` (an open stream's keep-alive renews it): an identity that subscribes and goes
    away leaves nothing in Redis for good."""
    async with _caller(replicas.urls[0], "ivy") as ivy:
        await ivy.subscribe("a://items/4")
    async with _modern(replicas.urls[1], "ivy") as modern:
        listening = modern.listen(resource_subscriptions=["a://items/8"])
        async with listening as subscription:
            assert subscription.honored.resource_subscriptions == ["a://items/8"]
    redis = connect_redis(redis_url)
    try:
        held = [key async for key in redis.scan_iter(match="conclave:mcp:sub*")]
        ivys = [k for k in map(str, held) if "ivy" in k or "items/4" in k or "items/8" in k]
        assert len(ivys) >= 3, held  # the identity's, and each resource's subscribers
        for key in ivys:
            assert 0 < await redis.pttl(key) <= TTL_S * 1000, key
    finally:
        await redis.aclose()
