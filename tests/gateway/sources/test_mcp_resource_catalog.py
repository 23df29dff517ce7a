"""`/mcp`'s resources across sources, through the official `mcp` client: two `mcp_http`
upstreams (`resource_upstream.py`, labels `a` and `b`) that serve the same URIs with
different content. Both copies are listed and readable (under URIs naming their source),
resource templates are listed and a concrete URI matching one is read from its source, and
`completion/complete` reaches the source owning the prompt or template."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import types
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import HttpUrl
from redis.asyncio import Redis

from conclave.bench.core.child_server import wait_listening
from conclave.stack.ports import free_port
from gateway.assembly import create_app
from gateway.config import Settings
from gateway.identity.tokens import issue_token
from tools.sources import McpHttpSource

pytestmark = pytest.mark.anyio

SERVER = Path(__file__).with_name("resource_upstream.py")


@pytest.fixture(scope="module")
def upstreams() -> Iterator[dict[str, str]]:
    """The two upstreams, by label: their MCP URLs."""
    urls: dict[str, str] = {}
    children: list[subprocess.Popen[bytes]] = []
    try:
        for label in ("a", "b"):
            port = free_port()
            argv = [sys.executable, str(SERVER), "--port", str(port), "--label", label]
            children.append(subprocess.Popen(argv))
            wait_listening(port, children[-1], 30, f"resource upstream {label}")
            urls[label] = f"http://127.0.0.1:{port}/mcp"
        yield urls
    finally:
        for child in children:
            child.terminate()
            with suppress(subprocess.TimeoutExpired):
                child.wait(10)


@asynccontextmanager
async def _mcp(settings: Settings, urls: dict[str, str], *scopes: str) -> AsyncIterator[Client]:
    sources = [
        McpHttpSource(kind="mcp_http", name=label, url=HttpUrl(url)) for label, url in urls.items()
    ]
    app = create_app(settings, sources=sources)
    agent = f"reader-{time.monotonic_ns()}"
    token = issue_token(settings, tenant="res", agent=agent, scopes=scopes)
    async with app.router.lifespan_context(app):
        http = httpx2.AsyncClient(
            transport=httpx2.ASGITransport(app=app),
            base_url="http://gateway",
            headers={"Authorization": f"Bearer {token}"},
        )
        transport = streamable_http_client("http://gateway/mcp", http_client=http)
        async with http, Client(transport) as client:
            yield client


async def _text(client: Client, uri: str) -> str:
    read = await client.read_resource(uri)
    content: Any = read.contents[0]
    return str(content.text)


async def test_two_sources_serving_one_uri_are_both_listed_and_read(
    settings: Settings, redis: Redis, upstreams: dict[str, str]
) -> None:
    async with _mcp(settings, upstreams, "tool:a.*", "tool:b.*") as client:
        listed = {str(r.uri) for r in (await client.list_resources()).resources}
        assert listed == {
            "conclave://a/notes://readme",
            "conclave://b/notes://readme",
            "a://status",
            "b://status",
        }
        assert await _text(client, "conclave://a/notes://readme") == "a notes"
        assert await _text(client, "conclave://b/notes://readme") == "b notes"
        assert (await _text(client, "b://status")).startswith("b status")
        assert (await _text(client, "conclave://a/a://status")).startswith("a status")
        with pytest.raises(MCPError) as ambiguous:
            await client.read_resource("notes://readme")  # which one? never a silent pick
        error = ambiguous.value.error.data
        assert error["code"] == "INVALID_REQUEST" and error["details"]["sources"] == ["a", "b"]
        assert "conclave://a/notes://readme" in error["message"]

    async with _mcp(settings, upstreams, "tool:b.*") as only_b:  # no collision in its view
        listed = {str(r.uri) for r in (await only_b.list_resources()).resources}
        assert listed == {"notes://readme", "b://status"}
        assert await _text(only_b, "notes://readme") == "b notes"
        with pytest.raises(MCPError) as hidden:
            await only_b.read_resource("conclave://a/notes://readme")
        assert hidden.value.error.data["code"] == "NOT_FOUND"


async def test_resource_templates_are_listed_and_a_concrete_uri_is_read_from_its_source(
    settings: Settings, redis: Redis, upstreams: dict[str, str]
) -> None:
    async with _mcp(settings, upstreams, "tool:a.*", "tool:b.*") as client:
        listed = (await client.list_resource_templates()).resource_templates
        assert {t.uri_template for t in listed} == {
            "conclave://a/notes://{topic}/page",
            "conclave://b/notes://{topic}/page",
            "a://items/{id}",
            "b://items/{id}",
        }
        assert await _text(client, "b://items/42") == "b item 42"
        assert await _text(client, "a://items/7") == "a item 7"
        assert await _text(client, "conclave://a/notes://rust/page") == "a page on rust"
        with pytest.raises(MCPError) as ambiguous:
            await client.read_resource("notes://rust/page")  # both templates match
        assert ambiguous.value.error.data["code"] == "INVALID_REQUEST"
        with pytest.raises(MCPError) as unknown:
            await client.read_resource("c://items/1")
        assert unknown.value.error.data["code"] == "NOT_FOUND"

    async with _mcp(settings, upstreams, "tool:a.*") as only_a:
        listed = (await only_a.list_resource_templates()).resource_templates
        assert {t.uri_template for t in listed} == {"notes://{topic}/page", "a://items/{id}"}
        assert await _text(only_a, "notes://go/page") == "a page on go"


async def test_completion_is_answered_by_the_source_owning_the_prompt_or_template(
    settings: Settings, redis: Redis, upstreams: dict[str, str]
) -> None:
    async with _mcp(settings, upstreams, "tool:a.*", "tool:b.*") as client:
        assert client.server_capabilities.completions is not None
        template = types.ResourceTemplateReference(type="ref/resource", uri="b://items/{id}")
        done = await client.complete(template, {"name": "id", "value": "b"})
        assert done.completion.values == ["b-1", "b-2"]
        shared = "conclave://a/notes://{topic}/page"  # a's copy of the shared template
        done = await client.complete(
            types.ResourceTemplateReference(type="ref/resource", uri=shared),
            {"name": "topic", "value": "a-"},
        )
        assert done.completion.values == ["a-1", "a-2"]
        prompt = types.PromptReference(type="ref/prompt", name="a.ask")
        done = await client.complete(prompt, {"name": "topic", "value": "al"})
        assert done.completion.values == ["alpha"]
        # The spelling of the source's tool names names its prompts too.
        prompt = types.PromptReference(type="ref/prompt", name="b__ask")
        done = await client.complete(prompt, {"name": "topic", "value": "b"})
        assert done.completion.values == ["beta"]
        got = await client.get_prompt("b__ask", {"topic": "owls"})
        assert "owls" in str(got.messages[0].content.text)  # type: ignore[union-attr]
        with pytest.raises(MCPError) as unknown:
            await client.complete(
                types.PromptReference(type="ref/prompt", name="c.ask"),
                {"name": "topic", "value": ""},
            )
        assert unknown.value.error.data["code"] == "NOT_FOUND"


@pytest.mark.parametrize(
    ("method", "target", "code", "said"),
    [
        ("read", "a://items/gone", "NOT_FOUND", "no item 'gone' on a"),
        ("read", "a://items/broken", "TOOL_FAILED", "item 'broken' is broken on purpose"),
        ("prompt", "broken", "TOOL_FAILED", "topic 'broken' is broken on purpose"),
    ],
)
async def test_an_upstreams_json_rpc_refusal_is_not_worth_retrying(
    settings: Settings,
    redis: Redis,
    upstreams: dict[str, str],
    method: str,
    target: str,
    code: str,
    said: str,
) -> None:
    """The upstream is up and refused this request: the same request would be refused again,
    so it is no UPSTREAM_UNAVAILABLE ("retry later") but a final error with its words."""
    async with _mcp(settings, upstreams, "tool:a.*") as client:
        with pytest.raises(MCPError) as refused:
            if method == "read":
                await client.read_resource(target)
            else:
                await client.get_prompt("a__ask", {"topic": target})
        error = refused.value.error.data
        assert (error["code"], error["retryable"]) == (code, False), error
        assert said in error["message"] and error["details"]["upstream"] == "a"
        assert (await _text(client, "a://items/7")) == "a item 7"  # the source still serves
