"""The security list, over real HTTP: every refusal has its exact SERF code and is audited."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator

import anyio
import httpx
import pytest

from conclave.stack import EmbeddedStack
from gateway.identity.tokens import issue_token

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.serial,
]  # timing-bound: run alone, after the parallel tiers (.ci/test)


@pytest.fixture
async def http(stack: EmbeddedStack) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=stack.url, timeout=10) as client:
        yield client


def _agent() -> str:
    return f"a{uuid.uuid4().hex[:10]}"


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def _refused(
    http: httpx.AsyncClient, stack: EmbeddedStack, response: httpx.Response, code: str, status: int
) -> dict[str, object]:
    """Check the envelope, then that the audit holds this very refusal (by its trace id)."""
    assert response.status_code == status, response.text
    body = response.json()
    envelope = body["error"]["data"] if "jsonrpc" in body else body
    assert envelope["code"] == code
    audit = await http.get("/v1/audit", params={"code": code}, headers=stack.admin_headers)
    assert any(r["trace_id"] == envelope["trace_id"] for r in audit.json()), audit.json()
    return envelope


async def _call(
    http: httpx.AsyncClient, tool: str, token: str | None, **body: object
) -> httpx.Response:
    headers = _bearer(token) if token else {}
    return await http.post(f"/v1/tools/{tool}/call", json=body, headers=headers)


async def test_no_token_tampered_and_expired(http: httpx.AsyncClient, stack: EmbeddedStack) -> None:
    args = {"arguments": {"message": "hi"}}
    await _refused(http, stack, await _call(http, "echo", None, **args), "AUTH_REQUIRED", 401)
    good = stack.token("acme", _agent(), ["tool:*"])
    header, _, signature = good.split(".")
    forged = issue_token(stack.settings, tenant="acme", agent="root", scopes=["tool:*"])
    tampered = f"{header}.{forged.split('.')[1]}.{signature}"
    response = await _call(http, "echo", tampered, **args)
    await _refused(http, stack, response, "AUTH_INVALID", 401)
    assert response.headers["www-authenticate"] == (  # a bad token: invalid_token (RFC 6750)
        f'Bearer error="invalid_token", resource_metadata="{stack.url}'
        '/.well-known/oauth-protected-resource/mcp"'
    )
    old = issue_token(stack.settings, tenant="acme", agent="w", ttl_s=1, now=time.time() - 60)
    await _refused(http, stack, await _call(http, "echo", old, **args), "AUTH_EXPIRED", 401)


async def test_a_revoked_agent_is_refused_on_its_next_request(
    http: httpx.AsyncClient, stack: EmbeddedStack
) -> None:
    agent = _agent()
    registration = {"tenant": "acme", "agent": agent, "tools": ["echo"], "obo": "alice"}
    issued = await http.post("/v1/agents", json=registration, headers=stack.admin_headers)
    assert issued.status_code == 201
    token = issued.json()["token"]
    ok = await _call(http, "echo", token, arguments={"message": "before"})
    assert ok.status_code == 200 and ok.json()["result"] == "before"
    listed = await http.get("/v1/agents", params={"tenant": "acme"}, headers=stack.admin_headers)
    assert agent in [a["agent"] for a in listed.json()]
    revoked = await http.delete(f"/v1/agents/acme/{agent}", headers=stack.admin_headers)
    assert revoked.status_code == 200 and revoked.json()["revoked"] is True
    response = await _call(http, "echo", token, arguments={"message": "after"})
    await _refused(http, stack, response, "AUTH_REVOKED", 401)


async def test_admin_routes_need_the_admin_key(
    http: httpx.AsyncClient, stack: EmbeddedStack
) -> None:
    for response in (
        await http.get("/v1/agents"),
        await http.get("/v1/audit", headers={"X-Conclave-Admin-Key": "guess"}),
        await http.post("/v1/agents", json={"tenant": "acme", "agent": "x"}),
    ):
        assert response.status_code == 403 and response.json()["code"] == "ADMIN_REQUIRED"


async def test_a_tool_outside_the_allow_list_is_refused_and_not_listed(
    http: httpx.AsyncClient, stack: EmbeddedStack
) -> None:
    token = stack.token("acme", _agent(), ["tool:echo", "tool:read_*"])
    listed = await http.get("/v1/tools", headers=_bearer(token))
    assert sorted(t["name"] for t in listed.json()) == ["echo", "read_file"]
    mcp = await http.post(
        "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers=_bearer(token),
    )
    assert sorted(t["name"] for t in mcp.json()["result"]["tools"]) == ["echo", "read_file"]
    response = await _call(http, "run_shell", token, arguments={"command": "id"})
    await _refused(http, stack, response, "TOOL_NOT_ALLOWED", 403)


async def test_wrong_argument_types_and_unknown_tools(
    http: httpx.AsyncClient, stack: EmbeddedStack
) -> None:
    token = stack.token("acme", _agent(), ["tool:*"])
    response = await _call(http, "echo", token, arguments={"message": ["not", "a", "string"]})
    envelope = await _refused(http, stack, response, "INVALID_ARGUMENTS", 422)
    assert envelope["param_hints"] == {"message": "Input should be a valid string"}
    response = await _call(http, "echo", token, arguments={"message": "x", "extra": 1})
    await _refused(http, stack, response, "INVALID_ARGUMENTS", 422)
    response = await _call(http, "no_such_tool", token, arguments={})
    await _refused(http, stack, response, "TOOL_NOT_FOUND", 404)
    response = await _call(
        http, "echo", token, arguments={"message": "x"}, limits={"memory_mb": 9999}
    )
    await _refused(http, stack, response, "LIMIT_ABOVE_INTENT", 422)


async def test_bodies_over_the_limit_declared_or_streamed(
    http: httpx.AsyncClient, stack: EmbeddedStack
) -> None:
    token = stack.token("acme", _agent(), ["tool:*"])
    big = {"arguments": {"message": "x" * 5000}}
    response = await http.post("/v1/tools/echo/call", json=big, headers=_bearer(token))
    await _refused(http, stack, response, "PAYLOAD_TOO_LARGE", 413)

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: chunked transfer
        yield b'{"arguments": {"message": "'
        for _ in range(10):
            yield b"y" * 1000
        yield b'"}}'

    response = await http.post("/v1/tools/echo/call", content=chunks(), headers=_bearer(token))
    await _refused(http, stack, response, "PAYLOAD_TOO_LARGE", 413)
    # On /mcp the refusal is a JSON-RPC error, and every JSON-RPC answer goes with HTTP 200.
    response = await http.post("/mcp", content=b"[" * 5000, headers=_bearer(token))
    await _refused(http, stack, response, "PAYLOAD_TOO_LARGE", 200)


async def test_malformed_json_rpc(http: httpx.AsyncClient, stack: EmbeddedStack) -> None:
    headers = {
        **_bearer(stack.token("acme", _agent(), ["tool:*"])),
        "Content-Type": "application/json",
    }
    cases = [
        # JSON-RPC errors, each with HTTP 200 (a client reads any other status as a transport
        # failure, and the mcp 1.x client ends its session on one).
        (b'{"jsonrpc": "2.0", "id": 1, "method": ', "PARSE_ERROR", -32700, 200),
        (b'{"jsonrpc": "1.0", "id": 1, "method": "tools/list"}', "INVALID_REQUEST", -32600, 200),
        (b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]', "INVALID_REQUEST", -32600, 200),
        (
            # a client's method (the server asks it), never one served here
            b'{"jsonrpc": "2.0", "id": 7, "method": "sampling/createMessage"}',
            "METHOD_NOT_FOUND",
            -32601,
            200,
        ),
    ]
    for body, code, rpc_code, status in cases:
        response = await http.post("/mcp", content=body, headers=headers)
        await _refused(http, stack, response, code, status)
        assert response.json()["error"]["code"] == rpc_code
    unknown = await http.post("/mcp", content=cases[-1][0], headers=headers)
    assert unknown.json()["id"] == 7
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo"}}
    failed = await http.post("/mcp", json=call, headers=headers)  # missing argument: isError
    result = failed.json()["result"]
    envelope = result["_meta"]["conclave/error"]  # echo declares an outputSchema
    assert result["isError"] is True and envelope["code"] == "INVALID_ARGUMENTS"
    assert (await http.delete("/mcp", headers=headers)).status_code == 405
    not_a_stream = await http.get("/mcp", headers=headers)  # GET /mcp needs Accept for SSE
    await _refused(http, stack, not_a_stream, "INVALID_REQUEST", 400)
    no_token = await http.post("/mcp", json=call)
    await _refused(http, stack, no_token, "AUTH_REQUIRED", 401)


async def test_a_flood_is_rate_limited_and_the_gateway_stays_healthy(
    http: httpx.AsyncClient, stack: EmbeddedStack
) -> None:
    token = stack.token("acme", _agent(), ["tool:echo"])
    other = stack.token("acme", _agent(), ["tool:echo"])
    responses: list[httpx.Response] = []

    async def one() -> None:
        responses.append(await _call(http, "echo", token, arguments={"message": "flood"}))

    async with anyio.create_task_group() as flood:  # burst 10 at 1/s: most of these are over
        for _ in range(40):
            flood.start_soon(one)
    statuses = [r.status_code for r in responses]
    assert statuses.count(200) >= 10 and statuses.count(429) >= 20
    limited = next(r for r in responses if r.status_code == 429)
    envelope = await _refused(http, stack, limited, "RATE_LIMITED", 429)
    assert isinstance(envelope["retry_after_ms"], int) and 0 < envelope["retry_after_ms"] <= 1000
    assert envelope["action"] == "retry_backoff" and limited.headers["retry-after"] == "1"
    ok = await _call(http, "echo", other, arguments={"message": "unaffected"})
    assert ok.status_code == 200  # another identity's bucket
    assert (await http.get("/readyz")).status_code == 200
    metrics = (await http.get("/metrics", headers=stack.admin_headers)).text
    assert 'conclave_rate_limited_total{operation="echo"}' in metrics


async def test_the_context_reaches_the_tool_and_the_body_cannot_override_it(
    http: httpx.AsyncClient, stack: EmbeddedStack
) -> None:
    token = stack.token("acme", _agent(), ["tool:echo"])
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    headers = {**_bearer(token), "traceparent": f"00-{trace}-00f067aa0ba902b7-01"}
    body = {"arguments": {"message": "hi"}, "principal": {"tenant": "evil"}}
    response = await http.post("/v1/tools/echo/call", json=body, headers=headers)
    await _refused(http, stack, response, "INVALID_REQUEST", 400)  # unknown fields refused
    response = await http.post(
        "/v1/tools/echo/call", json={"arguments": {"message": "hi"}}, headers=headers
    )
    assert response.status_code == 200 and response.json()["trace_id"] == trace


async def test_another_tenants_namespace_is_not_there(
    http: httpx.AsyncClient, stack: EmbeddedStack
) -> None:
    ns = f"notes{uuid.uuid4().hex[:6]}"
    owner = _bearer(stack.token("acme", _agent(), [f"state:{ns}:write"]))
    assert (await http.put(f"/v1/state/{ns}", json={}, headers=owner)).status_code == 201
    commit = {"writes": [{"key": "plan", "value": {"step": 1}}]}
    committed = await http.post(f"/v1/state/{ns}/commit", json=commit, headers=owner)
    assert committed.status_code == 200, committed.text
    assert (await http.get(f"/v1/state/{ns}/plan", headers=owner)).json()["value"] == {"step": 1}

    intruder = _bearer(stack.token("evil", _agent(), [f"state:{ns}:write"]))
    response = await http.get(f"/v1/state/{ns}/plan", headers=intruder)
    await _refused(http, stack, response, "NAMESPACE_NOT_FOUND", 404)
    response = await http.post(f"/v1/state/{ns}/commit", json=commit, headers=intruder)
    await _refused(http, stack, response, "NAMESPACE_NOT_FOUND", 404)
    unscoped = _bearer(stack.token("acme", _agent(), ["tool:*"]))
    response = await http.get(f"/v1/state/{ns}/plan", headers=unscoped)
    await _refused(http, stack, response, "NAMESPACE_NOT_FOUND", 404)
    reader = _bearer(stack.token("acme", _agent(), [f"state:{ns}:read"]))
    response = await http.post(f"/v1/state/{ns}/commit", json=commit, headers=reader)
    await _refused(http, stack, response, "NAMESPACE_FORBIDDEN", 403)
    assert (await http.get(f"/v1/state/{ns}/plan", headers=owner)).json()["value"] == {"step": 1}
