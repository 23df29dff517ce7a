"""Content passes through Conclave unchanged: an `mcp_http` upstream's images, audio,
embedded resources, resource links and structured output reach the official `mcp` client
at our `/mcp` as the upstream sent them, and its tools are listed with their own title,
annotations, icons, output schema and `_meta`. The upstream (`content_upstream.py`, FastMCP)
runs in its own process; each answer through Conclave is compared with the same call made
to the upstream directly.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from pydantic import HttpUrl
from redis.asyncio import Redis

from conclave.stack.ports import free_port
from gateway.assembly import create_app
from gateway.config import Settings
from gateway.identity.tokens import issue_token
from tools.sources import McpHttpSource

pytestmark = pytest.mark.anyio

SERVER = Path(__file__).with_name("content_upstream.py")
CALLS: dict[str, dict[str, Any]] = {
    "picture": {},
    "sound": {},
    "document": {},
    "link": {},
    "mixed": {},
    "forecast": {"city": "Oslo"},
}
LISTED_FIELDS = ("title", "description", "inputSchema", "outputSchema", "icons", "annotations")


@pytest.fixture(scope="module")
def upstream_url() -> Iterator[str]:
    port = free_port()
    child = subprocess.Popen([sys.executable, str(SERVER), "--port", str(port)])
    try:
        stop = time.monotonic() + 30
        while True:
            assert child.poll() is None, "the content upstream exited before listening"
            assert time.monotonic() < stop, "the content upstream did not listen within 30 s"
            with suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            time.sleep(0.05)  # polling the port, bounded above
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        child.terminate()
        child.wait(10)


@asynccontextmanager
async def _through_conclave(settings: Settings, url: str) -> AsyncIterator[tuple[Any, Client]]:
    source = McpHttpSource(kind="mcp_http", name="media", url=HttpUrl(url))
    app = create_app(settings, sources=(source,))
    token = issue_token(settings, tenant="media", agent="viewer", scopes=["tool:*"])
    async with app.router.lifespan_context(app):
        http = httpx2.AsyncClient(
            transport=httpx2.ASGITransport(app=app),
            base_url="http://gateway",
            headers={"Authorization": f"Bearer {token}"},
        )
        transport = streamable_http_client("http://gateway/mcp", http_client=http)
        async with http, Client(transport) as client:
            yield app, client


@asynccontextmanager
async def _direct(url: str) -> AsyncIterator[Client]:
    async with Client(streamable_http_client(url)) as client:
        yield client


def _dumped(model: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


async def test_every_kind_of_content_reaches_the_client_unchanged(
    settings: Settings, redis: Redis, upstream_url: str
) -> None:
    async with _direct(upstream_url) as direct:
        expected = {
            name: _dumped(await direct.call_tool(name, args)) for name, args in CALLS.items()
        }
    async with _through_conclave(settings, upstream_url) as (_, client):
        for name, args in CALLS.items():
            got = _dumped(await client.call_tool(f"media__{name}", args))
            assert got["isError"] is False, got
            assert got["content"] == expected[name]["content"], name
            assert got.get("structuredContent") == expected[name].get("structuredContent"), name
            assert "conclave/trace_id" in got["_meta"]
            if name == "mixed":  # the upstream's own _meta is kept beside Conclave's keys
                assert got["_meta"]["example.com/page"] == 2
    kinds = [block["type"] for block in expected["mixed"]["content"]]
    assert kinds == ["text", "image", "resource_link"]  # the fixture is what it claims
    assert expected["mixed"]["_meta"]["example.com/page"] == 2


async def test_upstream_tools_keep_their_title_annotations_icons_and_output_schema(
    settings: Settings, redis: Redis, upstream_url: str
) -> None:
    async with _direct(upstream_url) as direct:
        own = {t.name: _dumped(t) for t in (await direct.list_tools()).tools}
    async with _through_conclave(settings, upstream_url) as (_, client):
        served = {t.name: _dumped(t) for t in (await client.list_tools()).tools}
    forecast = served["media__forecast"]
    assert forecast["title"] == "Weather forecast"
    assert forecast["annotations"] == {"readOnlyHint": True, "openWorldHint": True}
    assert forecast["icons"][0]["src"] == "https://example.com/forecast.png"
    assert forecast["outputSchema"]["required"] == ["city", "celsius"]
    assert forecast["_meta"]["example.com/owner"] == "weather-team"
    for name, tool in own.items():
        listed = served[f"media__{name}"]
        for field in LISTED_FIELDS:
            assert listed.get(field) == tool.get(field), (name, field)
        assert listed["_meta"] == tool["_meta"], name


async def test_an_upstream_tool_error_stays_an_error_and_keeps_its_content(
    settings: Settings, redis: Redis, upstream_url: str
) -> None:
    async with _direct(upstream_url) as direct:
        expected = _dumped(await direct.call_tool("broken", {}))
    async with _through_conclave(settings, upstream_url) as (app, client):
        got = _dumped(await client.call_tool("media__broken", {}))
        rest = await _rest_call(app, settings, "media__broken")
    assert got["isError"] is True
    assert got["structuredContent"]["code"] == "TOOL_FAILED"
    assert "the camera jammed" in got["content"][0]["text"]  # the envelope's text first
    assert got["content"][1:] == expected["content"]  # then the upstream's, image and all
    assert rest.status_code != 200 and rest.json()["code"] == "TOOL_FAILED"
    assert rest.json()["details"]["content"] == expected["content"]


async def test_rest_answers_the_same_content_blocks(
    settings: Settings, redis: Redis, upstream_url: str
) -> None:
    async with _direct(upstream_url) as direct:
        expected = _dumped(await direct.call_tool("mixed", {}))
        forecast = _dumped(await direct.call_tool("forecast", {"city": "Oslo"}))
    async with _through_conclave(settings, upstream_url) as (app, _):
        mixed = await _rest_call(app, settings, "media__mixed")
        structured = await _rest_call(app, settings, "media__forecast", city="Oslo")
    assert mixed.status_code == 200, mixed.text
    assert mixed.json()["content"] == expected["content"]
    assert structured.json()["structuredContent"] == forecast["structuredContent"]
    assert structured.json()["result"] == {"city": "Oslo", "celsius": 21.5}


async def _rest_call(app: Any, settings: Settings, tool: str, **arguments: Any) -> httpx.Response:
    token = issue_token(settings, tenant="media", agent="rest", scopes=["tool:*"])
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://gateway"
    ) as client:
        return await client.post(
            f"/v1/tools/{tool}/call",
            json={"arguments": arguments},
            headers={"Authorization": f"Bearer {token}"},
        )
