"""Conclave as an OAuth 2.1 resource server (MCP authorization), over real HTTP.

A host that only speaks OAuth (the desktop and IDE hosts) connects with no token: the 401
points it at the RFC 9728 metadata, the metadata at the authorization server, and the token it
gets there, for this gateway's resource (RFC 8707), calls tools. The authorization server is a
real one on a loopback port (tests/oauth_authorization_server.py); the client is the official
`mcp` client's OAuth flow.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import httpx
import httpx2
import pytest
from mcp.client.auth import OAuthClientProvider
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

from conclave.stack import EmbeddedStack
from conclave.stack.ports import free_port
from gateway.config import Settings
from tests.oauth_authorization_server import AuthorizationServer, serving

pytestmark = pytest.mark.anyio

_MCP_INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t"}},
}


@pytest.fixture(scope="module")
def authorization_server() -> Iterator[AuthorizationServer]:
    with serving(AuthorizationServer(grantable={"tool:echo"})) as server:
        yield server


@pytest.fixture(scope="module")
def stack(redis_url: str, authorization_server: AuthorizationServer) -> Iterator[EmbeddedStack]:
    port = free_port()
    settings = Settings(
        redis_url=redis_url,
        port=port,
        sandbox_backend="process",
        secret="oauth-secret-" + "x" * 32,
        admin_key="oauth-admin-key",
        jwks_url=f"{authorization_server.issuer}/jwks",
        jwks_issuer=authorization_server.issuer,
        jwks_audience=f"http://127.0.0.1:{port}/mcp",  # this gateway's resource URL
        jwks_claims={"tenant": "org"},
    )
    with EmbeddedStack(settings) as running:
        yield running


def _challenge(response: httpx.Response) -> dict[str, str]:
    value = response.headers["www-authenticate"]
    assert value.startswith("Bearer")
    return dict(re.findall(r'(\w+)="([^"]*)"', value))


async def test_an_unauthenticated_request_is_pointed_at_the_authorization_server(
    stack: EmbeddedStack, authorization_server: AuthorizationServer
) -> None:
    async with httpx.AsyncClient() as http:
        refused = await http.post(f"{stack.url}/mcp", json=_MCP_INIT)
        assert refused.status_code == 401
        challenge = _challenge(refused)
        assert "error" not in challenge  # no token at all: no error code (RFC 6750)
        assert challenge["resource_metadata"] == (
            f"{stack.url}/.well-known/oauth-protected-resource/mcp"
        )
        document = (await http.get(challenge["resource_metadata"])).json()
        assert document["resource"] == f"{stack.url}/mcp"
        assert document["authorization_servers"] == [authorization_server.issuer]
        assert "tool:*" in document["scopes_supported"]
        root = await http.get(f"{stack.url}/.well-known/oauth-protected-resource")
        assert root.json() == document
        # REST routes challenge the same way.
        rest = await http.post(f"{stack.url}/v1/tools/echo/call", json={"arguments": {}})
        assert _challenge(rest)["resource_metadata"] == challenge["resource_metadata"]


class _MemoryStorage:
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


async def test_the_mcp_clients_oauth_flow_gets_a_token_and_calls_a_tool(
    stack: EmbeddedStack, authorization_server: AuthorizationServer
) -> None:
    redirected: list[str] = []

    async def consent(authorization_url: str) -> None:
        # The user's browser: the server consents at once and redirects back with a code.
        async with httpx2.AsyncClient() as browser:
            answer = await browser.get(authorization_url)
        assert answer.status_code == 302, answer.text
        redirected.append(answer.headers["location"])

    async def callback() -> AuthorizationCodeResult:
        query = parse_qs(urlsplit(redirected[-1]).query)
        return AuthorizationCodeResult(code=query["code"][0], state=query["state"][0])

    storage = _MemoryStorage()
    oauth = OAuthClientProvider(
        server_url=f"{stack.url}/mcp",
        client_metadata=OAuthClientMetadata(
            client_name="desktop host",
            redirect_uris=["http://127.0.0.1:9/callback"],  # nobody listens: `callback` reads it
            grant_types=["authorization_code"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=consent,
        callback_handler=callback,
    )
    http = create_mcp_http_client(auth=oauth)
    async with http, Client(streamable_http_client(f"{stack.url}/mcp", http_client=http)) as mcp:
        listed = await mcp.list_tools()
        assert [t.name for t in listed.tools] == ["echo"]  # the granted scope, no more
        answer = await mcp.call_tool("echo", {"message": "through OAuth"})
        assert not answer.is_error
        assert answer.structured_content == {"result": "through OAuth"}
    issued = authorization_server.issued[-1]
    assert issued["aud"] == f"{stack.url}/mcp"  # RFC 8707: the client asked for this resource
    assert issued["scope"] == "tool:echo"  # it asked for the metadata's scopes; this was granted
    assert storage.client is not None  # it registered itself (RFC 7591)
    assert redirected, "the flow went through the authorization endpoint"


async def test_wrong_audience_expired_and_missing_scope_are_refused_as_oauth_says(
    stack: EmbeddedStack, authorization_server: AuthorizationServer
) -> None:
    resource = f"{stack.url}/mcp"
    wrong_audience = authorization_server.token("app-x", "tool:echo", "http://elsewhere/mcp")
    expired = authorization_server.token("app-x", "tool:echo", resource, ttl_s=-60)
    echo_only = authorization_server.token("app-x", "tool:echo openid", resource)
    async with httpx.AsyncClient() as http:
        for token, code in ((wrong_audience, "AUTH_INVALID"), (expired, "AUTH_EXPIRED")):
            answer = await http.post(
                f"{stack.url}/mcp", json=_MCP_INIT, headers={"Authorization": f"Bearer {token}"}
            )
            assert answer.status_code == 401
            assert answer.json()["error"]["data"]["code"] == code
            challenge = _challenge(answer)
            assert challenge["error"] == "invalid_token"
            assert challenge["resource_metadata"].endswith("/oauth-protected-resource/mcp")

        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "run_shell", "arguments": {"command": "id"}},
        }
        headers = {"Authorization": f"Bearer {echo_only}"}
        stepped = await http.post(f"{stack.url}/mcp", json=call, headers=headers)
        assert stepped.status_code == 403
        assert stepped.json()["error"]["data"]["code"] == "TOOL_NOT_ALLOWED"
        challenge = _challenge(stepped)
        assert (challenge["error"], challenge["scope"]) == ("insufficient_scope", "tool:run_shell")
        assert "resource_metadata" in challenge
        rest = await http.post(
            f"{stack.url}/v1/tools/run_shell/call",
            json={"arguments": {"command": "id"}},
            headers=headers,
        )
        assert rest.status_code == 403
        assert _challenge(rest)["scope"] == "tool:run_shell"
        # The scope it was granted works (`openid` beside it is ignored, not refused).
        echo = {"arguments": {"message": "hi"}}
        ok = await http.post(f"{stack.url}/v1/tools/echo/call", json=echo, headers=headers)
        assert ok.status_code == 200, ok.text


async def test_the_gateways_own_tokens_keep_working_beside_the_providers(
    stack: EmbeddedStack,
) -> None:
    token = stack.token("acme", f"own{int(time.time() * 1000) % 100000}", ["tool:echo"])
    call = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "run_shell", "arguments": {"command": "id"}},
    }
    async with httpx.AsyncClient() as http:
        answer = await http.post(
            f"{stack.url}/mcp", json=call, headers={"Authorization": f"Bearer {token}"}
        )
    # No authorization server issued it, so there is nothing to step up: a tool error the
    # model sees (isError), as for every gateway token.
    assert answer.status_code == 200
    assert answer.json()["result"]["isError"] is True
