"""An `mcp_stdio` server's resource templates at `/mcp`: the conformance fixture
(`tools.harness.conformance_server`, FastMCP over stdio) run in the caller's bwrap sandbox.
Its template is listed, a concrete URI matching it is read from it, a completion reaches it,
and a subscription to one of its resources is the caller's server's (in its sandbox), which
takes it and gives it up (issue 24: it was refused before)."""

from __future__ import annotations

import json
import sys
import warnings
from typing import Any

import httpx2
import pytest
from mcp import MCPDeprecationWarning, types
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from redis.asyncio import Redis

from conclave.bench.mcp.conformance_suite import SANDBOX_FIXTURE
from gateway import Settings, create_app, issue_token
from protocol import ResourceIntent
from tools.sources import McpStdioSource

pytestmark = pytest.mark.anyio


async def test_a_stdio_servers_template_is_listed_read_and_completed(
    bwrap_available: None, redis_url: str, redis: Redis
) -> None:
    settings = Settings(
        redis_url=redis_url,
        sandbox_backend="bwrap",
        secret="stdio-res-" + "s" * 32,
        admin_key="stdio-res-admin",
        allowed_hosts=("gateway",),
    )
    # The host's interpreter has fastmcp (bwrap binds it at its own path).
    source = McpStdioSource(
        kind="mcp_stdio",
        name="fx",
        command=(sys.executable, SANDBOX_FIXTURE, "--stdio"),
        intent=ResourceIntent(timeout_ms=60_000, memory_mb=1024),
    )
    app = create_app(settings, sources=[source])
    token = issue_token(settings, tenant="t", agent="reader", scopes=["tool:fx.*"])
    async with app.router.lifespan_context(app):
        http = httpx2.AsyncClient(
            transport=httpx2.ASGITransport(app=app),
            base_url="http://gateway",
            headers={"Authorization": f"Bearer {token}"},
            timeout=120,
        )
        transport = streamable_http_client("http://gateway/mcp", http_client=http)
        # The handshake era: resources/subscribe is not part of the 2026-07-28 wire.
        async with http, Client(transport, mode="legacy") as client:
            templates = (await client.list_resource_templates()).resource_templates
            assert [t.uri_template for t in templates] == ["test://template/{id}/data"]
            read = await client.read_resource("test://template/42/data")
            content: Any = read.contents[0]
            assert json.loads(content.text)["id"] == "42"
            ref = types.ResourceTemplateReference(
                type="ref/resource", uri="test://template/{id}/data"
            )
            done = await client.complete(ref, {"name": "id", "value": "4"})
            assert done.completion.values == []  # the fixture suggests nothing: it answered
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await client.subscribe_resource("test://watched-resource")  # answered {}
                await client.unsubscribe_resource("test://watched-resource")
        # A client on the 2026-07-28 wire reads and completes alike: the gateway keeps that
        # wire's envelope to itself (the stdio server, of the handshake era, refuses it).
        http = httpx2.AsyncClient(
            transport=httpx2.ASGITransport(app=app),
            base_url="http://gateway",
            headers={"Authorization": f"Bearer {token}"},
            timeout=120,
        )
        transport = streamable_http_client("http://gateway/mcp", http_client=http)
        async with http, Client(transport) as client:
            read = await client.read_resource("test://template/7/data")
            assert json.loads(read.contents[0].text)["id"] == "7"  # type: ignore[union-attr]
            done = await client.complete(ref, {"name": "id", "value": "4"})
            assert done.completion.values == []
