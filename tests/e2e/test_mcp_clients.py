"""The official `mcp` client and the `fastmcp` client against `/mcp`, over real HTTP."""

from __future__ import annotations

import uuid

import pytest
from fastmcp import Client as FastMcpClient
from fastmcp.exceptions import ToolError
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from conclave.stack import EmbeddedStack

pytestmark = pytest.mark.anyio


def _token(stack: EmbeddedStack) -> str:
    return stack.token("acme", f"m{uuid.uuid4().hex[:8]}", ["tool:echo", "tool:read_*"])


async def test_the_mcp_client_lists_and_calls_with_a_bearer_token(stack: EmbeddedStack) -> None:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {_token(stack)}"})
    async with http, Client(streamable_http_client(f"{stack.url}/mcp", http_client=http)) as mcp:
        listed = await mcp.list_tools()
        assert sorted(t.name for t in listed.tools) == ["echo", "read_file"]
        answer = await mcp.call_tool("echo", {"message": "hello"})
        assert not answer.is_error
        assert answer.structured_content == {"result": "hello"}
        assert answer.content[0].text == "hello"  # type: ignore[union-attr]
        assert answer.meta is not None and len(answer.meta["conclave/trace_id"]) == 32

        wrong = await mcp.call_tool("echo", {"message": 5})  # a tool failure: isError
        assert wrong.is_error and wrong.structured_content is not None
        assert wrong.structured_content["code"] == "INVALID_ARGUMENTS"
        assert wrong.structured_content["action"] == "fix_args"
        # A client that shows only text sees what to fix, too.
        text = wrong.content[0].text  # type: ignore[union-attr]
        assert "- message: Input should be a valid string" in text

        with pytest.raises(MCPError) as typo:  # a typo: not found, with a tool it may call
            await mcp.call_tool("ecoh", {"message": "hello"})
        assert typo.value.error.data["code"] == "TOOL_NOT_FOUND"
        assert typo.value.error.data["details"]["suggestions"] == ["echo"]

        with pytest.raises(MCPError) as refused:  # a protocol error: JSON-RPC error
            await mcp.call_tool("run_shell", {"command": "id"})
        assert refused.value.error.data["code"] == "TOOL_NOT_ALLOWED"


async def test_the_fastmcp_client_lists_and_calls_with_a_bearer_token(
    stack: EmbeddedStack,
) -> None:
    async with FastMcpClient(f"{stack.url}/mcp", auth=_token(stack)) as client:
        assert sorted(t.name for t in await client.list_tools()) == ["echo", "read_file"]
        answer = await client.call_tool("echo", {"message": "fast"})
        assert answer.data == {"result": "fast"} or answer.structured_content == {"result": "fast"}
        with pytest.raises(ToolError, match="INVALID_ARGUMENTS"):
            await client.call_tool("echo", {})


async def test_an_mcp_client_without_a_valid_token_cannot_connect(stack: EmbeddedStack) -> None:
    with pytest.raises(MCPError) as failed:
        async with FastMcpClient(f"{stack.url}/mcp", auth="not-a-token") as client:
            await client.list_tools()
    assert failed.value.error.data["code"] == "AUTH_INVALID"
