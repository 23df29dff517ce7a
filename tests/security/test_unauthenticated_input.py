"""Input from anyone, signed in or not, cannot grow the gateway, its metrics or its audit, nor
crash it. Each attack runs against a real stack (the gateway under uvicorn in its own
process); after each, /metrics stays small, the audit record is small, and the gateway still
answers /readyz and an authenticated call."""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from conclave.stack import EmbeddedStack
from gateway.config import Settings
from gateway.pipeline import AccountStage, RequestContext
from gateway.redis_io import connect_redis
from gateway.telemetry import (
    ANONYMOUS_STREAM,
    FEED_STREAM,
    OTHER,
    AuditLog,
    AuditRecord,
    AuditWriter,
    GatewayMetrics,
)

pytestmark = pytest.mark.anyio

MAX_BODY = 1_048_576
SMALL_METRICS = 64 * 1024
HUGE = 900_000


@pytest.fixture(scope="module")
def stack(redis_url: str) -> Iterator[EmbeddedStack]:
    settings = Settings(
        redis_url=redis_url, port=0, sandbox_backend="inprocess", max_body_bytes=MAX_BODY
    )
    with EmbeddedStack(settings) as running:
        yield running


@pytest.fixture
async def http(stack: EmbeddedStack) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=stack.url, timeout=30) as client:
        yield client


def _token(stack: EmbeddedStack, *scopes: str) -> dict[str, str]:
    token = stack.token("acme", f"a{uuid.uuid4().hex[:10]}", scopes)
    return {"Authorization": f"Bearer {token}"}


def _rpc(method: str, **params: object) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


def _nested(depth: int) -> object:
    value: object = "bottom"
    for _ in range(depth):
        value = [value]
    return value


async def _audited(http: httpx.AsyncClient, stack: EmbeddedStack, trace_id: str) -> str:
    """The audit record of `trace_id`, as the JSON the admin API answers."""
    audit = await http.get("/v1/audit", params={"limit": 1000}, headers=stack.admin_headers)
    [record] = [r for r in audit.json() if r["trace_id"] == trace_id]
    return json.dumps(record)


async def _still_well(http: httpx.AsyncClient, stack: EmbeddedStack) -> None:
    metrics = await http.get("/metrics", headers=stack.admin_headers)
    assert len(metrics.content) < SMALL_METRICS, len(metrics.content)
    assert "xxxxxxxx" not in metrics.text
    assert (await http.get("/readyz")).status_code == 200
    echo = await http.post(
        "/v1/tools/echo/call",
        json={"arguments": {"message": "still here"}},
        headers=_token(stack, "tool:echo"),
    )
    assert echo.status_code == 200 and echo.json()["result"] == "still here"


async def test_a_huge_method_or_tool_name_grows_neither_metrics_nor_audit(
    http: httpx.AsyncClient, stack: EmbeddedStack
) -> None:
    name = "x" * HUGE
    for method in (f"notifications/{name}", name):  # anonymous: refused by authentication
        response = await http.post("/mcp", json=_rpc(method))
        assert response.status_code == 401
        data = response.json()["error"]["data"]
        assert data["code"] == "AUTH_REQUIRED"
        assert len(await _audited(http, stack, data["trace_id"])) < 2048
    signed_in = _token(stack, "tool:*")
    unknown = await http.post("/mcp", json=_rpc(name), headers=signed_in)
    assert unknown.json()["error"]["data"]["code"] == "METHOD_NOT_FOUND"
    assert len(unknown.content) < 4096  # the answer does not echo the name back whole
    call = await http.post("/mcp", json=_rpc("tools/call", name=name), headers=signed_in)
    data = call.json()["result"]["structuredContent"]  # a tool error: isError
    assert data["code"] == "TOOL_NOT_FOUND"
    record = await _audited(http, stack, data["trace_id"])
    assert len(record) < 2048 and "chars, cut]" in json.loads(record)["tool"]
    rest = await http.post(f"/v1/tools/{'y' * 60_000}/call", json={}, headers=signed_in)
    assert rest.json()["code"] == "TOOL_NOT_FOUND"
    await _still_well(http, stack)


def _raw_answer(stack: EmbeddedStack, head: bytes, body_part: bytes) -> bytes:
    """Send `head` and only the start of a far larger body; what the gateway answers."""
    host, port = httpx.URL(stack.url).host, httpx.URL(stack.url).port
    assert port is not None
    with socket.create_connection((host, port), timeout=10) as conn:
        conn.sendall(head + body_part)
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = conn.recv(65536)  # a timeout here: the gateway waits for the whole body
            if not chunk:
                break
            answer += chunk
        return answer


async def test_an_anonymous_upload_to_the_admin_api_is_refused_before_it_is_read(
    http: httpx.AsyncClient, stack: EmbeddedStack
) -> None:
    declared = (
        b"POST /v1/agents HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 80000000\r\n\r\n"
    )
    answer = _raw_answer(stack, declared, b'{"tenant": "' + b"a" * 1000)
    assert answer.startswith(b"HTTP/1.1 403"), answer[:200]  # ADMIN_REQUIRED, body unread
    # An admin's chunked upload (no length declared) is cut off at the limit, not read whole.
    key = next(iter(stack.admin_headers.items()))
    chunked = (
        b"POST /v1/agents HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        + f"{key[0]}: {key[1]}\r\n".encode()
        + b"Transfer-Encoding: chunked\r\n\r\n"
    )
    chunk = b"a" * 65536
    body = (b"%x\r\n" % len(chunk) + chunk + b"\r\n") * (MAX_BODY // len(chunk) + 2)
    answer = _raw_answer(stack, chunked, body)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    await _still_well(http, stack)


async def test_deeply_nested_json_is_a_parse_error_on_every_route(
    http: httpx.AsyncClient, stack: EmbeddedStack
) -> None:
    deep = _nested(100)  # past the gateway's 64 levels, far short of the size limit
    signed_in = _token(stack, "tool:*", "state:*:write")
    response = await http.post("/mcp", json=_rpc("tools/call", name="echo", arguments=deep))
    assert response.status_code == 401  # anonymous: authentication answers, no 500
    bomb = b"[" * 200_000 + b"]" * 200_000  # deep enough to exhaust a recursive parser
    response = await http.post("/mcp", content=bomb)
    assert response.status_code == 401, response.text
    response = await http.post("/mcp", content=bomb, headers=signed_in)
    assert response.status_code == 200  # a JSON-RPC error, which goes with HTTP 200
    assert response.json()["error"]["code"] == -32700  # JSON-RPC's parse error
    assert response.json()["error"]["data"]["code"] == "PARSE_ERROR"
    call = {"arguments": {"message": deep}}
    response = await http.post("/v1/tools/echo/call", json=call, headers=signed_in)
    assert (response.status_code, response.json()["code"]) == (400, "PARSE_ERROR")
    commit = {"writes": [{"key": "k", "value": deep}]}
    response = await http.post("/v1/state/deepns/commit", json=commit, headers=signed_in)
    assert (response.status_code, response.json()["code"]) == (400, "PARSE_ERROR")
    registration = {"tenant": "acme", "agent": "deep", "tools": deep}
    response = await http.post("/v1/agents", json=registration, headers=stack.admin_headers)
    assert (response.status_code, response.json()["code"]) == (400, "PARSE_ERROR")
    await _still_well(http, stack)


async def test_a_name_with_a_trailing_newline_is_not_a_name(
    http: httpx.AsyncClient, stack: EmbeddedStack
) -> None:
    signed_in = _token(stack, "state:*:write")
    created = await http.put("/v1/state/ns%0A", headers=signed_in)
    assert (created.status_code, created.json()["code"]) == (422, "INVALID_ARGUMENTS")
    assert (await http.put("/v1/state/plain", headers=signed_in)).status_code in (200, 201)
    lease = {"keys": ["key\n"], "ttl_ms": 1000}
    leased = await http.post("/v1/state/plain/leases", json=lease, headers=signed_in)
    assert (leased.status_code, leased.json()["code"]) == (422, "INVALID_ARGUMENTS")
    registration = {"tenant": "acme", "agent": "nl", "tools": ["echo\n"]}
    response = await http.post("/v1/agents", json=registration, headers=stack.admin_headers)
    assert (response.status_code, response.json()["code"]) == (400, "INVALID_REQUEST")
    listed = await http.get("/v1/agents", params={"tenant": "acme"}, headers=stack.admin_headers)
    assert "nl" not in [a["agent"] for a in listed.json()]  # refused before it was stored
    await _still_well(http, stack)


async def test_an_operation_the_gateway_does_not_serve_is_counted_as_other() -> None:
    metrics = GatewayMetrics()
    account = AccountStage(AuditWriter(AuditLog(connect_redis("redis://unused"))), metrics)
    for made_up in ("mcp:" + "x" * 10_000, "state:" + "y" * 10_000):
        await account(RequestContext("mcp", made_up, {}))
    assert (
        metrics.registry.get_sample_value(
            "conclave_requests_total", {"transport": "mcp", "operation": OTHER, "outcome": "ok"}
        )
        == 2
    )


async def test_the_audit_stream_keeps_about_audit_stream_max_records(redis_url: str) -> None:
    redis = connect_redis(redis_url)
    try:
        audit = AuditLog(redis, max_records=50)
        record = AuditRecord(
            at_ms=0,
            trace_id="t",
            transport="http",
            operation="tools:list",
            outcome="ok",
            duration_ms=0.0,
        )
        for _ in range(10):
            await audit.append(*[record] * 100)
        # MAXLEN ~: Redis trims whole stream nodes (100 entries each), never keeps 1000: not
        # in the stream of unauthenticated refusals, nor in the feed.
        assert await redis.xlen(ANONYMOUS_STREAM) <= 50 + 100
        assert await redis.xlen(FEED_STREAM) <= 50 + 100
    finally:
        await redis.aclose()
