"""`/mcp` on the wire (issue 24): JSON-RPC answers go with HTTP 200 (401 only for the
credential, 403 only for a refused Origin), a refused or unknown tool is a tool error,
version negotiation answers the newest revision, a bad `MCP-Protocol-Version` header is
400, and every message takes a token from the caller's rate limit."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from gateway.config import Settings
from gateway.identity.tokens import issue_token
from protocol import ADMIN_KEY_HEADER, SerfError
from tests.helpers import in_process_gateway

pytestmark = pytest.mark.anyio

NEWEST = "2025-11-25"
BURST = 3


@pytest.fixture
async def http(settings: Settings, redis: Redis) -> AsyncIterator[httpx.AsyncClient]:
    # A burst small enough to empty in a few messages, refilled too slowly to matter here.
    limited = settings.model_copy(update={"rate_limit_burst": BURST, "rate_limit_per_s": 0.01})
    async with in_process_gateway(limited) as client:
        yield client


def _bearer(settings: Settings, *scopes: str, tenant: str = "acme", agent: str = "caller") -> Any:
    token = issue_token(settings, tenant=tenant, agent=agent, scopes=list(scopes))
    return {"Authorization": f"Bearer {token}"}


def _rpc(method: str, params: dict[str, Any] | None = None, id: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "method": method, "params": params or {}}


def _rpc_error(answer: httpx.Response, status: int, code: str) -> SerfError:
    assert answer.status_code == status, answer.text
    error = SerfError.model_validate(answer.json()["error"]["data"])
    assert error.code == code
    return error


def _tool_error(answer: httpx.Response, code: str) -> dict[str, Any]:
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()["result"]
    assert result["isError"] is True and result["structuredContent"]["code"] == code
    return result


async def test_protocol_errors_go_with_http_200_and_the_envelope_in_data(
    http: httpx.AsyncClient, settings: Settings
) -> None:
    auth = _bearer(settings, "tool:echo")
    unknown = await http.post("/mcp", json=_rpc("conclave/no-such-method"), headers=auth)
    assert _rpc_error(unknown, 200, "METHOD_NOT_FOUND").action is not None
    assert unknown.json()["error"]["code"] == -32601
    unreadable = await http.post("/mcp", content=b"{not json", headers=auth)
    _rpc_error(unreadable, 200, "PARSE_ERROR")
    bad_params = await http.post("/mcp", json=_rpc("tools/call", {"arguments": 5}), headers=auth)
    _rpc_error(bad_params, 200, "INVALID_REQUEST")
    # The credential keeps its 401 and its challenge: the client's cue to authenticate.
    anonymous = await http.post("/mcp", json=_rpc("tools/list"))
    _rpc_error(anonymous, 401, "AUTH_REQUIRED")
    assert anonymous.headers["www-authenticate"].startswith("Bearer")


async def test_a_tool_the_caller_may_not_call_is_a_tool_error(
    http: httpx.AsyncClient, settings: Settings
) -> None:
    auth = _bearer(settings, "tool:echo")
    outside = await http.post("/mcp", json=_rpc("tools/call", {"name": "run_shell"}), headers=auth)
    _tool_error(outside, "TOOL_NOT_ALLOWED")
    typo = await http.post("/mcp", json=_rpc("tools/call", {"name": "ecoh"}), headers=auth)
    assert _tool_error(typo, "TOOL_NOT_FOUND")["structuredContent"]["details"] == {
        "suggestions": ["echo"]
    }
    # Suggestions name only tools the caller may call.
    near = await http.post("/mcp", json=_rpc("tools/call", {"name": "run_shel"}), headers=auth)
    assert _tool_error(near, "TOOL_NOT_FOUND")["structuredContent"]["details"] == {
        "suggestions": []
    }
    assert "run_shell" not in near.text


async def test_a_revoked_token_learns_nothing_of_the_tools_served(
    http: httpx.AsyncClient, settings: Settings
) -> None:
    admin = {ADMIN_KEY_HEADER: settings.admin_key.get_secret_value()}
    registration = {"tenant": "acme", "agent": "gone", "tools": ["echo"]}
    registered = await http.post("/v1/agents", json=registration, headers=admin)
    assert registered.status_code == 201, registered.text
    auth = {"Authorization": f"Bearer {registered.json()['token']}"}
    typo = _rpc("tools/call", {"name": "ecoh", "arguments": {}})
    assert (await http.post("/mcp", json=typo, headers=auth)).json()["result"]["isError"]
    assert (await http.delete("/v1/agents/acme/gone", headers=admin)).status_code == 200
    # On /mcp a tool error (a client that ends its session on a 401 would end the agent's
    # run, test_mcp_client_matrix), on REST a 401: neither names a tool.
    over_mcp = await http.post("/mcp", json=typo, headers=auth)
    assert over_mcp.status_code == 200, over_mcp.text
    assert over_mcp.json()["result"]["isError"] is True
    over_rest = await http.post("/v1/tools/ecoh/call", json={"arguments": {}}, headers=auth)
    assert over_rest.status_code == 401, over_rest.text
    for answer in (over_mcp, over_rest):
        assert "AUTH_REVOKED" in answer.text and "echo" not in answer.text


async def test_initialize_answers_the_newest_revision_for_one_it_does_not_serve(
    http: httpx.AsyncClient, settings: Settings
) -> None:
    auth = _bearer(settings, "tool:echo")
    for asked, answered in (("2099-01-01", NEWEST), ("2025-03-26", "2025-03-26")):
        params = {"protocolVersion": asked, "capabilities": {}, "clientInfo": {"name": "t"}}
        answer = await http.post("/mcp", json=_rpc("initialize", params), headers=auth)
        assert answer.status_code == 200, answer.text
        assert answer.json()["result"]["protocolVersion"] == answered


async def test_a_protocol_version_header_not_served_is_refused_400(
    http: httpx.AsyncClient, settings: Settings
) -> None:
    auth = _bearer(settings, "tool:echo")
    wrong = await http.post(
        "/mcp", json=_rpc("tools/list"), headers={**auth, "MCP-Protocol-Version": "1999-01-01"}
    )
    error = _rpc_error(wrong, 400, "INVALID_REQUEST")
    assert NEWEST in error.details["supported"] and "MCP-Protocol-Version" in error.message
    for header in ({"MCP-Protocol-Version": NEWEST}, {}):  # none: 2025-03-26 is assumed
        fine = await http.post("/mcp", json=_rpc("tools/list"), headers={**auth, **header})
        assert fine.status_code == 200 and "tools" in fine.json()["result"], fine.text


async def test_an_origin_outside_the_host_allow_list_is_refused_403(
    http: httpx.AsyncClient, settings: Settings
) -> None:
    auth = _bearer(settings, "tool:echo")
    for origin in ("http://evil.example", "null", "http://gateway.evil.example:80"):
        refused = await http.post(
            "/mcp", json=_rpc("tools/list"), headers={**auth, "Origin": origin}
        )
        _rpc_error(refused, 403, "PERMISSION_DENIED")
        assert refused.json()["id"] is None
    for header in ({"Origin": "http://gateway:8321"}, {}):  # its own host, or no browser
        fine = await http.post("/mcp", json=_rpc("tools/list"), headers={**auth, **header})
        assert fine.status_code == 200 and "tools" in fine.json()["result"], fine.text


async def test_every_mcp_message_takes_a_rate_limit_token(
    http: httpx.AsyncClient, settings: Settings
) -> None:
    noisy = _bearer(settings, "tool:echo", tenant="noisy", agent="lister")
    ping = await http.post("/mcp", json=_rpc("ping"), headers=noisy)
    assert ping.status_code == 200 and ping.json()["result"] == {}
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await http.post("/mcp", json=note, headers=noisy)).status_code == 202
    listed = await http.post("/mcp", json=_rpc("tools/list"), headers=noisy)
    assert listed.status_code == 200 and listed.json()["result"]["tools"]
    # The burst is spent: the next list is refused, as a JSON-RPC error with HTTP 200.
    refused = await http.post("/mcp", json=_rpc("tools/list", id=9), headers=noisy)
    error = _rpc_error(refused, 200, "RATE_LIMITED")
    assert error.retry_after_ms is not None and error.retry_after_ms > 0
    assert refused.json()["id"] == 9
    # A refused notification has no answer to carry the error: its status says it.
    assert (await http.post("/mcp", json=note, headers=noisy)).status_code == 429
    # Another tenant's bucket is its own.
    quiet = _bearer(settings, "tool:echo", tenant="quiet", agent="lister")
    for _ in range(BURST):
        other = await http.post("/mcp", json=_rpc("tools/list"), headers=quiet)
        assert other.status_code == 200 and other.json()["result"]["tools"], other.text
