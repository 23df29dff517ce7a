"""`/mcp` on MCP 2026-07-28's stateless wire, beside the handshake era, over real HTTP.

A real gateway with the upstream test server as the `mcp_http` source `notes` (its
resource and prompt too); the official `mcp` 2.x client and raw requests as the revision
spells them (version and client capabilities in `params._meta`, `Mcp-Method`/`Mcp-Name`).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from conclave.stack import EmbeddedStack

pytestmark = pytest.mark.anyio

VERSION = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
}
_NAMED_BY = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


@pytest.fixture
async def http(federated_stack: EmbeddedStack) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=federated_stack.url, timeout=60) as client:
        yield client


def _agent(stack: EmbeddedStack, scopes: list[str]) -> tuple[str, str]:
    agent = f"s{uuid.uuid4().hex[:8]}"
    return agent, stack.token("acme", agent, scopes)


def _headers(token: str, method: str, params: dict[str, Any]) -> dict[str, str]:
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": VERSION,
        "Mcp-Method": method,
    }
    if (field := _NAMED_BY.get(method)) is not None:
        headers["Mcp-Name"] = params[field]
    return headers


async def _send(
    http: httpx.AsyncClient,
    token: str,
    method: str,
    params: dict[str, Any] | None = None,
    *,
    headers: dict[str, str] | None = None,
    drop: tuple[str, ...] = (),
    rpc_id: int = 7,
) -> httpx.Response:
    """A 2026-07-28 request: `_meta` added unless params carry their own; `headers` override
    the conformant ones, `drop` removes some."""
    sent = {"_meta": META, **(params or {})}
    wire = {**_headers(token, method, sent), **(headers or {})}
    for name in drop:
        wire.pop(name)
    message = {"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": sent}
    return await http.post("/mcp", json=message, headers=wire)


async def test_the_mcp_client_speaks_the_2026_wire_discover_list_call(
    federated_stack: EmbeddedStack, http: httpx.AsyncClient
) -> None:
    agent, token = _agent(federated_stack, ["tool:echo", "tool:notes.echo", "tool:notes.read*"])
    client_http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    transport = streamable_http_client(f"{federated_stack.url}/mcp", http_client=client_http)
    async with client_http, Client(transport) as mcp:
        assert mcp.protocol_version == VERSION  # discovered, not the handshake's fallback
        assert mcp.server_info is not None and mcp.server_info.name == "conclave"
        listed = await mcp.list_tools()
        assert sorted(t.name for t in listed.tools) == ["echo", "notes__echo"]
        assert listed.cache_scope == "private" and listed.ttl_ms == 5000
        answer = await mcp.call_tool("echo", {"message": "on the new wire"})
        assert not answer.is_error and answer.structured_content == {"result": "on the new wire"}
    # The gateway's own record: discovered, listed and called; no handshake.
    audit = await http.get(
        "/v1/audit", params={"agent": agent}, headers=federated_stack.admin_headers
    )
    operations = {record["operation"] for record in audit.json()}
    assert {"mcp:server/discover", "mcp:tools/list", "echo"} <= operations
    assert "mcp:initialize" not in operations


async def test_server_discover_answers_the_callers_own_surface(
    federated_stack: EmbeddedStack, http: httpx.AsyncClient
) -> None:
    _, narrow = _agent(federated_stack, ["tool:echo"])
    _, wide = _agent(federated_stack, ["tool:echo", "tool:notes.echo", "tool:notes.read*"])
    answers = [(await _send(http, token, "server/discover")) for token in (narrow, wide)]
    assert [a.status_code for a in answers] == [200, 200]
    narrow_result, wide_result = (a.json()["result"] for a in answers)
    assert VERSION in narrow_result["supportedVersions"]
    assert "2025-11-25" in narrow_result["supportedVersions"]  # the handshake era too
    assert {"tools", "resources", "prompts"} <= set(narrow_result["capabilities"])
    assert narrow_result["_meta"]["conclave/tools"] == ["echo"]
    assert sorted(wide_result["_meta"]["conclave/tools"]) == ["echo", "notes__echo"]
    for result in (narrow_result, wide_result):
        assert result["resultType"] == "complete"
        assert result["cacheScope"] == "private" and result["ttlMs"] == 5000
        assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "conclave"


async def test_lists_and_reads_carry_private_cache_hints_and_every_result_a_type(
    federated_stack: EmbeddedStack, http: httpx.AsyncClient
) -> None:
    _, token = _agent(federated_stack, ["tool:echo", "tool:notes.*"])  # its resources too
    for method, params in (
        ("tools/list", {}),
        ("resources/list", {}),
        ("prompts/list", {}),
        ("resources/read", {"uri": "notes://readme"}),
    ):
        answer = await _send(http, token, method, params)
        assert answer.status_code == 200, (method, answer.text)
        result = answer.json()["result"]
        assert result["resultType"] == "complete", method
        assert (result["ttlMs"], result["cacheScope"]) == (5000, "private"), method
    called = await _send(http, token, "tools/call", {"name": "echo", "arguments": {"message": "x"}})
    result = called.json()["result"]
    assert result["resultType"] == "complete" and "ttlMs" not in result
    assert result["structuredContent"] == {"result": "x"}
    failed = await _send(http, token, "tools/call", {"name": "echo", "arguments": {"message": 5}})
    failure = failed.json()["result"]  # a tool error is a result too, typed like one
    assert failure["isError"] and failure["resultType"] == "complete"


async def test_a_revocation_reaches_a_caching_client_within_the_ttl(
    federated_stack: EmbeddedStack, http: httpx.AsyncClient
) -> None:
    """`ttlMs` is how long a client may keep a list; the gateway keeps none, so a revoked
    agent's re-fetch, once `ttlMs` has passed, is refused."""
    agent = f"r{uuid.uuid4().hex[:8]}"
    registration = {"tenant": "acme", "agent": agent, "tools": ["echo"]}
    issued = await http.post("/v1/agents", json=registration, headers=federated_stack.admin_headers)
    assert issued.status_code == 201, issued.text
    token = issued.json()["token"]
    listed = await _send(http, token, "tools/list")
    ttl_ms = listed.json()["result"]["ttlMs"]
    assert 0 < ttl_ms <= 5000
    revoked = await http.delete(f"/v1/agents/acme/{agent}", headers=federated_stack.admin_headers)
    assert revoked.status_code == 200
    await asyncio.sleep(ttl_ms / 1000)
    again = await _send(http, token, "tools/list")
    assert again.status_code == 401
    assert again.json()["error"]["data"]["code"] == "AUTH_REVOKED"


async def test_missing_or_contradictory_meta_and_headers_are_refused_400(
    federated_stack: EmbeddedStack, http: httpx.AsyncClient
) -> None:
    _, token = _agent(federated_stack, ["tool:echo"])
    call = {"name": "echo", "arguments": {"message": "x"}}
    no_meta = await _send(http, token, "tools/list", {"_meta": {}}, rpc_id=101)
    no_caps = {"io.modelcontextprotocol/protocolVersion": VERSION}
    no_capabilities = await _send(http, token, "tools/list", {"_meta": no_caps}, rpc_id=102)
    for answer, rpc_id in ((no_meta, 101), (no_capabilities, 102)):
        assert answer.status_code == 400, answer.text
        assert answer.json()["id"] == rpc_id
        assert answer.json()["error"]["code"] == -32602

    mismatched = [
        await _send(http, token, "tools/list", headers={"Mcp-Method": "prompts/list"}),
        await _send(http, token, "tools/list", headers={"Mcp-Method": "TOOLS/LIST"}),
        await _send(http, token, "tools/list", drop=("Mcp-Method",)),
        await _send(http, token, "tools/call", call, headers={"Mcp-Name": "run_shell"}),
        await _send(http, token, "tools/call", call, drop=("Mcp-Name",)),
        await _send(http, token, "tools/list", headers={"MCP-Protocol-Version": "2025-11-25"}),
    ]
    for answer in mismatched:
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"]["code"] == -32020
        assert answer.json()["error"]["data"]["code"] == "INVALID_REQUEST"  # the SERF envelope
    future = {**META, "io.modelcontextprotocol/protocolVersion": "v999.0.0"}
    unsupported = await _send(
        http,
        token,
        "server/discover",
        {"_meta": future},
        headers={"MCP-Protocol-Version": "v999.0.0"},
    )
    assert unsupported.status_code == 400
    error = unsupported.json()["error"]
    assert error["code"] == -32022
    assert error["data"]["requested"] == "v999.0.0" and VERSION in error["data"]["supported"]


async def test_removed_methods_answer_404_on_the_new_wire_and_keep_working_on_the_old(
    federated_stack: EmbeddedStack, http: httpx.AsyncClient
) -> None:
    """The 2026 wire has no handshake: its removed methods and unknown ones are 404, after
    the pipeline's own decisions (no credential: 401 first). A client without `_meta` keeps
    the handshake era, whose results carry none of the revision's fields."""
    unauthenticated = await _send(
        http, "", "server/discover", {"_meta": {}}, drop=("Authorization",)
    )
    assert unauthenticated.status_code == 401
    assert unauthenticated.headers["www-authenticate"].startswith("Bearer")
    _, token = _agent(federated_stack, ["tool:echo"])
    for method in ("initialize", "ping", "logging/setLevel", "resources/subscribe", "no/such"):
        answer = await _send(http, token, method, rpc_id=500)
        assert answer.status_code == 404, (method, answer.text)
        body = answer.json()
        assert body["id"] == 500 and body["error"]["code"] == -32601
        assert body["error"]["data"]["code"] == "METHOD_NOT_FOUND"

    handshake = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
    init = {"protocolVersion": "2025-11-25", "capabilities": {}}
    init |= {"clientInfo": {"name": "t", "version": "1"}}
    answers = [
        await http.post("/mcp", json=m, headers=handshake)
        for m in (
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            {"jsonrpc": "2.0", "id": 3, "method": "ping"},
        )
    ]
    assert [a.status_code for a in answers] == [200, 200, 200]
    assert answers[0].json()["result"]["protocolVersion"] == "2025-11-25"
    assert [t["name"] for t in answers[1].json()["result"]["tools"]] == ["echo"]
    assert not {"resultType", "ttlMs", "cacheScope"} & set(answers[1].json()["result"])
