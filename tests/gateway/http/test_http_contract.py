"""The HTTP and MCP contract as a client meets it (issue 16): bodies need no Content-Type, a
wrong method is a 405 SERF answer, a typo in a tool name is TOOL_NOT_FOUND with suggestions,
MCP text content carries the argument hints, and /openapi.json documents every route."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from fastapi.routing import iter_route_contexts
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from redis.asyncio import Redis

from conclave.stack import EmbeddedStack
from gateway.assembly import create_app
from gateway.config import Settings
from gateway.http import GatewayApp
from gateway.identity.tokens import issue_token
from protocol import ADMIN_KEY_HEADER, SerfError

pytestmark = pytest.mark.anyio

REGISTRATION = b'{"tenant":"acme","agent":"writer","tools":["echo"],"obo":"alice"}'


@pytest.fixture
async def app(settings: Settings, redis: Redis) -> AsyncIterator[GatewayApp]:
    gateway = create_app(settings)
    async with gateway.router.lifespan_context(gateway):
        yield gateway


@pytest.fixture
async def http(app: GatewayApp) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
        yield client


def _admin(settings: Settings) -> dict[str, str]:
    return {ADMIN_KEY_HEADER: settings.admin_key.get_secret_value()}


def _bearer(settings: Settings, *scopes: str) -> dict[str, str]:
    token = issue_token(settings, tenant="acme", agent="caller", scopes=list(scopes))
    return {"Authorization": f"Bearer {token}"}


def _serf(response: httpx.Response, status: int, code: str) -> SerfError:
    assert response.status_code == status, response.text
    error = SerfError.model_validate(response.json())
    assert error.code == code and error.http_status == status
    return error


# --- bodies ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    [None, "application/x-www-form-urlencoded", "text/plain"],
    ids=["no Content-Type", "curl -d's form type", "text/plain"],
)
async def test_a_json_body_is_read_as_json_whatever_its_content_type_says(
    http: httpx.AsyncClient, settings: Settings, content_type: str | None
) -> None:
    headers = _admin(settings) | ({"Content-Type": content_type} if content_type else {})
    registered = await http.post("/v1/agents", content=REGISTRATION, headers=headers)
    assert registered.status_code == 201, registered.text
    token = registered.json()["token"]
    call = await http.post(
        "/v1/tools/echo/call",
        content=b'{"arguments":{"message":"hi"}}',
        headers={"Authorization": f"Bearer {token}"}
        | ({"Content-Type": content_type} if content_type else {}),
    )
    assert call.status_code == 200, call.text
    assert call.json()["result"] == "hi"


async def test_a_body_that_is_not_json_is_a_serf_refusal(
    http: httpx.AsyncClient, settings: Settings
) -> None:
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    refused = await http.post(
        "/v1/agents", content=b"tenant=acme&agent=writer", headers=_admin(settings) | form
    )
    error = _serf(refused, 400, "PARSE_ERROR")
    assert "JSON" in error.message


# --- methods -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("DELETE", "/healthz", {"GET"}),  # an ordinary route
        ("PUT", "/v1/agents", {"GET", "POST"}),  # two routes: Allow names both
        ("GET", "/v1/tools/echo/call", {"POST"}),  # hot routes (the fast path)
        ("PUT", "/v1/state/notes/commit", {"GET", "POST"}),  # GET: reads key "commit"
        ("POST", "/v1/state/notes/some-key", {"GET"}),
        ("DELETE", "/mcp", {"GET", "POST"}),  # no session to end
    ],
)
async def test_a_wrong_method_is_405_with_allow_and_a_serf_body(
    http: httpx.AsyncClient, settings: Settings, method: str, path: str, allowed: set[str]
) -> None:
    headers = _bearer(settings, "tool:*", "state:notes:write") | _admin(settings)
    answer = await http.request(method, path, headers=headers)
    error = _serf(answer, 405, "METHOD_NOT_ALLOWED")
    # HEAD: taken wherever GET is, in Starlette's routes (not in FastAPI's)
    assert {m.strip() for m in answer.headers["Allow"].split(",")} - {"HEAD"} == allowed
    assert set(error.details["allow"]) - {"HEAD"} == allowed
    assert method in error.message


# --- tool names --------------------------------------------------------------------------


async def test_a_typo_in_a_tool_name_is_not_found_with_a_suggestion_it_may_call(
    http: httpx.AsyncClient, settings: Settings
) -> None:
    narrow = _bearer(settings, "tool:echo")
    typo = await http.post("/v1/tools/ecoh/call", json={"arguments": {}}, headers=narrow)
    error = _serf(typo, 404, "TOOL_NOT_FOUND")
    assert error.details["suggestions"] == ["echo"]
    assert "echo" in error.param_hints["name"] and "'echo'" in error.message
    latency = await http.get("/v1/tools/ecoh/latency", headers=narrow)
    assert _serf(latency, 404, "TOOL_NOT_FOUND").details["suggestions"] == ["echo"]

    # A served tool outside the token's scopes stays TOOL_NOT_ALLOWED...
    outside = await http.post("/v1/tools/run_shell/call", json={"arguments": {}}, headers=narrow)
    _serf(outside, 403, "TOOL_NOT_ALLOWED")
    _serf(await http.get("/v1/tools/run_shell/latency", headers=narrow), 403, "TOOL_NOT_ALLOWED")
    # ... and a typo of it suggests nothing this token may not call.
    near = await http.post("/v1/tools/run_shel/call", json={"arguments": {}}, headers=narrow)
    hidden = _serf(near, 404, "TOOL_NOT_FOUND")
    assert hidden.details["suggestions"] == []
    assert "run_shell" not in near.text
    broad = await http.post("/v1/tools/run_shel/call", json={}, headers=_bearer(settings, "tool:*"))
    assert _serf(broad, 404, "TOOL_NOT_FOUND").details["suggestions"] == ["run_shell"]


async def test_a_typo_over_mcp_is_tool_not_found_with_the_suggestion(
    http: httpx.AsyncClient, settings: Settings
) -> None:
    # A tool error (isError, HTTP 200), which a model sees and a client session survives.
    message = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "ecoh"}}
    answer = await http.post("/mcp", json=message, headers=_bearer(settings, "tool:echo"))
    assert answer.status_code == 200, answer.text
    result = answer.json()["result"]
    assert result["isError"] is True
    assert result["structuredContent"]["code"] == "TOOL_NOT_FOUND"
    assert result["structuredContent"]["details"]["suggestions"] == ["echo"]
    assert "did you mean 'echo'?" in result["content"][0]["text"]


# --- MCP text content ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def stack(redis_url: str) -> Iterator[EmbeddedStack]:
    with EmbeddedStack(Settings(redis_url=redis_url, port=0, sandbox_backend="process")) as up:
        yield up


async def test_the_mcp_text_content_of_an_argument_error_names_what_to_fix(
    stack: EmbeddedStack,
) -> None:
    token = stack.token("acme", "mcp-hints", ["tool:echo"])
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http, Client(streamable_http_client(f"{stack.url}/mcp", http_client=http)) as mcp:
        wrong = await mcp.call_tool("echo", {"message": 5})
        assert wrong.is_error
        text = wrong.content[0].text  # type: ignore[union-attr]
        assert text.startswith("INVALID_ARGUMENTS: ")
        assert "- message: Input should be a valid string" in text
        typo = await mcp.call_tool("ecoh", {"message": "hi"})
        assert typo.is_error
        assert "did you mean 'echo'?" in typo.content[0].text  # type: ignore[union-attr]


# --- the OpenAPI document ------------------------------------------------------------------


def _operations(document: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (path, method.upper()): operation
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
    }


async def test_the_openapi_document_lists_every_route_with_its_refusals(
    http: httpx.AsyncClient, app: GatewayApp
) -> None:
    document = (await http.get("/openapi.json")).json()
    operations = _operations(document)
    assert ("/v1/tools/{name}/call", "POST") in operations
    assert {("/mcp", "POST"), ("/mcp", "GET"), ("/mcp", "DELETE")} <= set(operations)
    served = {
        (route.path_format.replace(":path", ""), method)
        for route in iter_route_contexts(app.routes)
        if route.path_format is not None and getattr(route, "include_in_schema", True)
        for method in (route.methods or set()) - {"HEAD"}
    }
    assert served and served <= set(operations), served - set(operations)

    for (path, method), operation in operations.items():
        # On POST /mcp, a JSON-RPC error carries the envelope in error.data.
        rpc = (path, method) == ("/mcp", "POST")
        refusal = "JsonRpcErrorResponse" if rpc else "SerfError"
        for status in ("4XX", "5XX"):
            schema = operation["responses"][status]["content"]["application/json"]["schema"]
            assert schema == {"$ref": f"#/components/schemas/{refusal}"}, (path, status)
        assert "422" not in operation["responses"]  # FastAPI's shape, never the gateway's
    assert "SerfError" in document["components"]["schemas"]
    assert "HTTPValidationError" not in document["components"]["schemas"]
