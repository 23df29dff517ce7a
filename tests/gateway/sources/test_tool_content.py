"""Conclave's own tools speak MCP content: a `@tool` that returns an image reaches the
official `mcp` client at `/mcp`, and REST, as an image block (through the sandbox runner's
wire, and in-process); the built-in tools are listed with an `outputSchema` and the hints
their declared intent implies, and their structured results follow that schema.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from redis.asyncio import Redis

import tools.harness.media  # noqa: F401  registers `snapshot` and `report_link`
from gateway.assembly import create_app
from gateway.config import Settings
from gateway.identity.tokens import issue_token
from protocol import Principal, ToolContext
from sandbox import InProcessExecutor
from tools import default_registry
from tools.calls import CallLimits, Invocation
from tools.harness.media import PIXEL_PNG

pytestmark = pytest.mark.anyio

MEDIA_MODULES = ("tools.builtin", "tools.harness.media")
PIXEL = base64.b64encode(PIXEL_PNG).decode()


@asynccontextmanager
async def _served(settings: Settings) -> AsyncIterator[tuple[Client, httpx.AsyncClient]]:
    """The official `mcp` client at /mcp and a REST client, both as one agent; the tools run
    in the sandbox (the tests' process backend, behind the runner's wire)."""
    app = create_app(settings.model_copy(update={"tool_modules": MEDIA_MODULES}))
    token = issue_token(settings, tenant="media", agent="artist", scopes=["tool:*"])
    headers = {"Authorization": f"Bearer {token}"}
    async with app.router.lifespan_context(app):
        http = httpx2.AsyncClient(
            transport=httpx2.ASGITransport(app=app), base_url="http://gateway", headers=headers
        )
        rest = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://gateway", headers=headers
        )
        transport = streamable_http_client("http://gateway/mcp", http_client=http)
        async with http, rest, Client(transport) as client:
            yield client, rest


def _dumped(model: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


async def test_a_tool_returning_an_image_reaches_mcp_and_rest_as_an_image(
    settings: Settings, redis: Redis
) -> None:
    async with _served(settings) as (client, rest):
        answer = _dumped(await client.call_tool("snapshot", {"caption": "a red dot"}))
        link = _dumped(await client.call_tool("report_link", {"quarter": 3}))
        over_rest = await rest.post(
            "/v1/tools/snapshot/call", json={"arguments": {"caption": "a red dot"}}
        )
    picture = {"type": "image", "data": PIXEL, "mimeType": "image/png"}
    assert answer["isError"] is False
    assert answer["content"] == [{"type": "text", "text": "a red dot"}, picture]
    assert "structuredContent" not in answer  # content blocks only: no schema, no value
    assert link["content"] == [
        {"type": "resource_link", "uri": "file:///reports/q3.pdf", "name": "q3"}
    ]
    assert over_rest.status_code == 200, over_rest.text
    assert over_rest.json()["content"] == [{"type": "text", "text": "a red dot"}, picture]


async def test_an_image_from_an_in_process_tool_is_an_image_block() -> None:
    principal = Principal(tenant="t", agent="a", expires_at=2**40, token_id="x")
    context = ToolContext(principal=principal, session_id="s", trace_id="0" * 32, traceparent="")
    snapshot = default_registry.get("snapshot")
    assert snapshot is not None
    invocation = Invocation(
        "snapshot",
        snapshot.entrypoint,
        {"caption": "dot"},
        context,
        CallLimits(memory_mb=64, cpu_seconds=2, timeout_ms=5_000, max_output_bytes=1 << 20),
    )
    outcome = await InProcessExecutor(default_registry).execute(invocation)
    assert outcome.output is not None, outcome.error
    assert [block["type"] for block in outcome.output.content] == ["text", "image"]
    assert outcome.output.content[1]["data"] == PIXEL


async def test_built_in_tools_declare_their_output_schema_and_intent(
    settings: Settings, redis: Redis
) -> None:
    async with _served(settings) as (client, _):
        listed = {t.name: _dumped(t) for t in (await client.list_tools()).tools}
        echoed = _dumped(await client.call_tool("echo", {"message": "hi"}))
        shell = _dumped(await client.call_tool("run_shell", {"command": "echo out"}))
    builtins = ("echo", "read_file", "write_file", "run_shell", "run_python")
    hints = {name: listed[name]["annotations"] for name in builtins}
    assert hints["echo"] == {
        "readOnlyHint": True,
        "destructiveHint": False,
        "idempotentHint": True,
        "openWorldHint": False,
    }
    assert hints["read_file"]["readOnlyHint"] is True
    assert hints["write_file"]["readOnlyHint"] is False
    assert hints["write_file"]["destructiveHint"] is True
    for name in ("run_shell", "run_python"):
        assert hints[name]["destructiveHint"] is True and hints[name]["idempotentHint"] is False
    # A plain value is wrapped as {"result": ...}, as its schema says; a mapping is itself.
    assert listed["echo"]["outputSchema"]["properties"]["result"] == {"type": "string"}
    assert echoed["structuredContent"] == {"result": "hi"}
    assert echoed["content"] == [{"type": "text", "text": "hi"}]
    shell_schema = listed["run_shell"]["outputSchema"]
    assert set(shell_schema["required"]) == {"stdout", "stderr", "exit_code"}
    assert shell["structuredContent"]["stdout"] == "out\n"
    assert shell["structuredContent"]["exit_code"] == 0
    assert "outputSchema" not in listed["snapshot"]  # it answers content blocks
