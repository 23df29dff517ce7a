"""The official `mcp` client and the `fastmcp` client against `/mcp`, over real HTTP."""

from __future__ import annotations

import uuid
from typing import Literal

import pytest
from fastmcp import Client as FastMcpClient
from fastmcp.exceptions import ToolError
from mcp import types
from mcp.client.client import Client
from mcp.client.session import ClientSession
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
        # echo declares an outputSchema, which an error need not fit: the envelope is in
        # `_meta` (clients built on the TypeScript SDK check structuredContent against it).
        assert wrong.is_error and wrong.structured_content is None and wrong.meta is not None
        assert wrong.meta["conclave/error"]["code"] == "INVALID_ARGUMENTS"
        assert wrong.meta["conclave/error"]["action"] == "fix_args"
        # A client that shows only text sees what to fix, too.
        text = wrong.content[0].text  # type: ignore[union-attr]
        assert "- message: Input should be a valid string" in text

        # A typo: a tool error, not found, suggesting a tool it may call.
        typo = await mcp.call_tool("ecoh", {"message": "hello"})
        assert typo.is_error and typo.structured_content is not None
        assert typo.structured_content["code"] == "TOOL_NOT_FOUND"
        assert typo.structured_content["details"]["suggestions"] == ["echo"]

        # A tool outside its scopes: a tool error too, which the model sees and recovers from.
        refused = await mcp.call_tool("run_shell", {"command": "id"})
        assert refused.is_error and refused.structured_content is not None
        assert refused.structured_content["code"] == "TOOL_NOT_ALLOWED"


class _NoSuchMethod(types.Request[None, Literal["conclave/no-such-method"]]):
    method: Literal["conclave/no-such-method"] = "conclave/no-such-method"
    params: None = None


async def _survives_refusals(session: ClientSession | Client) -> None:
    """A refused tool, an unknown tool and an unknown method, each followed by a call that
    must work on the same session (the mcp 1.x client ended it on a 4xx)."""
    refused = await session.call_tool("run_shell", {"command": "id"})
    assert refused.is_error
    assert (await session.call_tool("echo", {"message": "after refused"})).content
    unknown = await session.call_tool("no_such_tool", {})
    assert unknown.is_error
    assert (await session.call_tool("echo", {"message": "after unknown"})).content
    sender = session.session if isinstance(session, Client) else session
    with pytest.raises(MCPError) as no_method:
        await sender.send_request(_NoSuchMethod(), types.EmptyResult)
    assert no_method.value.error.code == types.METHOD_NOT_FOUND
    assert no_method.value.error.data["code"] == "METHOD_NOT_FOUND"
    after = await session.call_tool("echo", {"message": "after unknown method"})
    assert not after.is_error and after.structured_content == {"result": "after unknown method"}
    assert [t.name for t in (await session.list_tools()).tools] == ["echo", "read_file"]


async def test_refusals_do_not_end_a_session_of_the_low_level_client(
    stack: EmbeddedStack,
) -> None:
    """`ClientSession` over the transport's streams: how the mcp 1.x client (and
    langchain-mcp-adapters, which pins it) is used."""
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {_token(stack)}"})
    transport = streamable_http_client(f"{stack.url}/mcp", http_client=http)
    async with http, transport as streams, ClientSession(streams[0], streams[1]) as session:
        await session.initialize()
        await _survives_refusals(session)


async def test_refusals_do_not_end_a_session_of_the_client(stack: EmbeddedStack) -> None:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {_token(stack)}"})
    async with http, Client(streamable_http_client(f"{stack.url}/mcp", http_client=http)) as mcp:
        await _survives_refusals(mcp)


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
