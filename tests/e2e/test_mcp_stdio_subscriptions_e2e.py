"""News from an `mcp_stdio` server, run in the subscriber's own sandbox, reaches that
subscriber's `GET /mcp` stream (and, on MCP 2026-07-28, its `subscriptions/listen` stream),
through two gateway processes on one Redis, with the official `mcp` client.

The server (`tools/harness/stdio_mcp_server.py --resources`) counts the times its tool
`touch` touched a resource and tells a subscribed client `notifications/resources/updated`:
before the call's answer (heard during the call), or a moment after it (heard while the
sandbox sits idle between calls: the pool watches a sandbox a subscription holds). Another
identity, whose own server nobody subscribed, hears nothing; an update said in a sandbox of
one gateway reaches a stream held by the other.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import types
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ResourceUpdated, ServerEvent, Subscription

from conclave.stack import EmbeddedStack
from gateway.config import Settings
from gateway.identity.tokens import issue_token
from tests.helpers import until

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning"),
]

SERVER = Path(__file__).resolve().parents[2] / "tools" / "harness" / "stdio_mcp_server.py"
SECRETS = {"secret": "stdio-news-" + "n" * 32, "admin_key": "stdio-news-admin-key"}
WATCHED = "watch://counter"


@pytest.fixture(scope="module")
def replicas(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    """Two gateway processes on one Redis, each serving the server as an mcp_stdio source."""
    config = tmp_path_factory.mktemp("stdio-news") / "conclave.toml"
    command = f'["python3", "{SERVER}", "--resources"]'
    config.write_text(f'[[source]]\nname = "w"\nkind = "mcp_stdio"\ncommand = {command}\n')
    settings = Settings(
        redis_url=redis_url, port=0, sandbox_backend="process", config=config, **SECRETS
    )
    with EmbeddedStack(settings) as first, EmbeddedStack(settings) as second:
        yield [first.url, second.url]


def _token(agent: str) -> str:
    return issue_token(
        Settings(**SECRETS), tenant="news", agent=agent, scopes=("tool:w.*", "tool:w__*")
    )


@dataclass
class Caller:
    client: Client
    heard: list[Any] = field(default_factory=list)

    def updates(self) -> int:
        found = [m for m in self.heard if isinstance(m, types.ResourceUpdatedNotification)]
        return [str(m.params.uri) for m in found].count(WATCHED)

    async def touch(self, after: float = 0.0) -> None:
        answer = await self.client.call_tool("w__touch", {"uri": WATCHED, "after": after})
        assert not answer.is_error, answer

    async def until_heard(self, count: int, *, after: float = 0.0) -> None:
        """Until `count` updates have come, touching meanwhile (the GET stream opens in the
        background after `initialize`: news before it is lost)."""
        with anyio.fail_after(30):
            while self.updates() < count:
                await self.touch(after)
                with suppress(TimeoutError):  # not yet: touch it again
                    await until(lambda: self.updates() >= count, after + 0.5)


@asynccontextmanager
async def _caller(url: str, agent: str) -> AsyncIterator[Caller]:
    heard: list[Any] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ServerNotification | Exception):
            heard.append(message)

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {_token(agent)}"}, timeout=30)
    transport = streamable_http_client(f"{url}/mcp", http_client=http)
    async with http, Client(transport, mode="legacy", message_handler=on_message) as client:
        yield Caller(client, heard)


async def test_a_stdio_servers_update_reaches_its_subscriber_during_a_call_and_while_idle(
    replicas: list[str],
) -> None:
    async with AsyncExitStack() as stack:
        ada = await stack.enter_async_context(_caller(replicas[0], "ada"))
        bob = await stack.enter_async_context(_caller(replicas[0], "bob"))
        caps = ada.client.server_capabilities.resources
        assert caps is not None and caps.subscribe
        await ada.client.subscribe_resource(WATCHED)  # (deprecated on 2026-07-28)
        await ada.until_heard(1)  # said before the touch's answer: during the call
        await ada.until_heard(ada.updates() + 1, after=0.2)  # said after it: while idle
        read = await ada.client.read_resource(WATCHED)
        assert int(read.contents[0].text) >= 2  # type: ignore[union-attr]
        await bob.touch()  # bob's own server: nobody subscribed it
        await ada.until_heard(ada.updates() + 1)  # ada's news keeps coming meanwhile
        assert bob.updates() == 0


async def test_an_update_in_a_sandbox_of_one_gateway_reaches_a_stream_held_by_the_other(
    replicas: list[str],
) -> None:
    first, second = replicas
    async with _caller(second, "cyd") as cyd:  # cyd's stream is held by the second gateway
        headers = {"Authorization": f"Bearer {_token('cyd')}"}
        subscribe = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "resources/subscribe",
            "params": {"uri": WATCHED},
        }
        touch = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "w__touch", "arguments": {"uri": WATCHED}},
        }
        async with httpx.AsyncClient(base_url=first, headers=headers, timeout=30) as http:
            answer = await http.post("/mcp", json=subscribe)  # in cyd's sandbox on the first
            assert answer.json() == {"jsonrpc": "2.0", "id": 1, "result": {}}, answer.text
            with anyio.fail_after(30):
                while cyd.updates() == 0:
                    told = await http.post("/mcp", json=touch)
                    assert not told.json()["result"].get("isError"), told.text
                    with suppress(TimeoutError):  # not yet: touch it again
                        await until(lambda: cyd.updates() > 0, 0.5)


async def _heard(subscription: Subscription, into: list[ServerEvent]) -> None:
    async for event in subscription:
        into.append(event)


async def test_a_2026_listener_hears_its_stdio_servers_update_while_the_sandbox_is_idle(
    replicas: list[str],
) -> None:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {_token('gus')}"}, timeout=30)
    transport = streamable_http_client(f"{replicas[0]}/mcp", http_client=http)
    async with http, Client(transport) as gus:
        assert gus.protocol_version == "2026-07-28"
        async with gus.listen(resource_subscriptions=[WATCHED]) as subscription:
            assert subscription.honored.resource_subscriptions == [WATCHED]
            events: list[ServerEvent] = []
            async with anyio.create_task_group() as listening:
                listening.start_soon(_heard, subscription, events)
                with anyio.fail_after(30):
                    while ResourceUpdated(WATCHED) not in events:
                        touched = await gus.call_tool("w__touch", {"uri": WATCHED, "after": 0.2})
                        assert not touched.is_error, touched
                        with suppress(TimeoutError):  # not yet: touch it again
                            await until(lambda: ResourceUpdated(WATCHED) in events, 0.7)
                listening.cancel_scope.cancel()
