"""A subscription to an `mcp_stdio` server's resource subscribes the server in the
subscriber's own sandbox, which the pool then holds (what the server says reaches the
subscriber's stream: `tests/e2e/test_mcp_stdio_subscriptions_e2e.py`).

The official `mcp` client against the gateway in-process (real Redis, the process backend's
real runner), the stdio harness server with `--resources`. Another identity's server is not
subscribed; an unsubscribed server is told; the held sandbox outlives the pool's idle time.
A sandbox recycled under a subscription is replaced at the listener's next keep-alive: the
new sandbox's server is subscribed again.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import MCPDeprecationWarning
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from redis.asyncio import Redis

from gateway.assembly import create_app
from gateway.config import Settings
from gateway.http.gateway_parts import gateway_parts
from gateway.identity.tokens import issue_token
from protocol import Principal
from sandbox import SandboxPool
from tests.helpers import until
from tools.sources import McpStdioSource

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning"),
]

ROOT = Path(__file__).resolve().parents[3]
SERVER = ("python3", str(ROOT / "tools" / "harness" / "stdio_mcp_server.py"), "--resources")
WATCHED = "watch://counter"


@asynccontextmanager
async def _gateway(settings: Settings, **sandbox: Any) -> AsyncIterator[Any]:
    source = McpStdioSource(kind="mcp_stdio", name="w", command=SERVER)
    update = {"sandbox_backend": "process", **sandbox}
    app = create_app(settings.model_copy(update=update), sources=[source])
    async with app.router.lifespan_context(app):
        yield app


@dataclass
class Caller:
    client: Client
    agent: str

    async def subscribe(self, uri: str, *, on: bool = True) -> None:
        with warnings.catch_warnings():  # deprecated in 2026-07-28, served in the handshake era
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            if on:
                await self.client.subscribe_resource(uri)
            else:
                await self.client.unsubscribe_resource(uri)

    async def call(self, tool: str, **arguments: Any) -> str:
        answer = await self.client.call_tool(f"w__{tool}", arguments)
        assert not answer.is_error, answer
        return str(answer.content[0].text)  # type: ignore[union-attr]


@asynccontextmanager
async def _caller(app: Any, settings: Settings, agent: str) -> AsyncIterator[Caller]:
    token = issue_token(settings, tenant="subs", agent=agent, scopes=["tool:*"])
    http = httpx2.AsyncClient(
        transport=httpx2.ASGITransport(app=app),
        base_url="http://gateway",
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    )
    transport = streamable_http_client("http://gateway/mcp", http_client=http)
    async with http, Client(transport, mode="legacy") as client:
        yield Caller(client, agent)


async def test_subscribing_subscribes_the_callers_own_server_and_holds_its_sandbox(
    settings: Settings, redis: Redis
) -> None:
    """ada's server (in ada's sandbox) is subscribed, bob's is not; ada's sandbox is kept
    past the pool's idle time while the subscription holds it; unsubscribing tells the
    server."""
    async with _gateway(settings, sandbox_idle_s=0.05) as app, AsyncExitStack() as stack:
        ada = await stack.enter_async_context(_caller(app, settings, "ada"))
        bob = await stack.enter_async_context(_caller(app, settings, "bob"))
        await ada.subscribe(WATCHED)
        pid = await ada.call("pid")
        assert json.loads(await ada.call("subscriptions")) == [WATCHED]  # in ada's sandbox
        assert json.loads(await bob.call("subscriptions")) == []  # bob's own server: not
        pool = gateway_parts(app).executor
        assert isinstance(pool, SandboxPool)
        await anyio.sleep(0.1)  # past the pool's idle time (nothing to await: time passing)
        await pool.reap_idle()  # bob's idle sandbox goes; ada's is held by its subscription
        assert await ada.call("pid") == pid  # the same server, still subscribed
        assert json.loads(await ada.call("subscriptions")) == [WATCHED]

        await ada.subscribe(WATCHED, on=False)
        assert json.loads(await ada.call("subscriptions")) == []  # the server was told


async def test_a_subscription_outlives_its_sandbox_being_recycled(
    settings: Settings, redis: Redis
) -> None:
    """Recycled after its fifth call, the subscribed sandbox is gone; the listener's
    keep-alive subscribes the server again in the new sandbox."""
    async with (
        _gateway(settings, sandbox_recycle_after=5) as app,
        _caller(app, settings, "cy") as cy,
    ):
        await cy.subscribe(WATCHED)  # the sandbox's first call
        pids = {await cy.call("pid") for _ in range(4)}  # ... then recycled
        assert await cy.call("pid") not in pids  # a new sandbox
        subscriptions = gateway_parts(app).mcp_catalog.subscriptions
        principal = Principal(
            tenant="subs", agent="cy", scopes=("tool:*",), expires_at=2**40, token_id="t"
        )
        await subscriptions.keep_alive(principal)  # what an open stream does every 15 s
        await until(lambda: subscriptions.renewed == 1, 20)  # in the gateway's background
        assert json.loads(await cy.call("subscriptions")) == [WATCHED]
