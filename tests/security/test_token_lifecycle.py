"""Tokens an attacker keeps, widens or stretches (issue 13, WP-E), through the gateway's HTTP API.

Each token carries its agent's generation; registering or revoking the agent moves it on, so a
token from `conclave token issue` (run here as the real command, against the same Redis) dies
with its registration. `token issue` signs only within a registration and a lifetime cap, and
a JWKS provider's token must name the configured issuer and audience.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
import jwt
import pytest
from redis.asyncio import Redis
from typer.testing import CliRunner

from conclave.cli import app
from gateway.config import Settings
from gateway.identity.tokens import issue_token
from tests.helpers import admin_headers, in_process_gateway, register
from tests.identity_provider import AUDIENCE, ISSUER, KEY, serving_jwks

pytestmark = pytest.mark.anyio

ECHO = {"arguments": {"message": "hi"}}


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """Tools run in the gateway's threads: what is tested here is admission, not isolation."""
    return settings.model_copy(update={"sandbox_backend": "inprocess"})


@pytest.fixture
async def client(settings: Settings, redis: Redis) -> AsyncIterator[httpx.AsyncClient]:
    async with in_process_gateway(settings) as http:
        yield http


@dataclass(frozen=True)
class Issued:
    code: int
    token: str
    error: str


async def _token_issue(settings: Settings, *args: str) -> Issued:
    """Run `conclave token issue` against the gateway's Redis and secret (in a worker thread:
    the command runs its own event loop)."""
    env = {
        "CONCLAVE_REDIS_URL": settings.redis_url or "",
        "CONCLAVE_SECRET": settings.secret.get_secret_value(),
    }
    runner = CliRunner()
    done = await anyio.to_thread.run_sync(
        lambda: runner.invoke(app, ["token", "issue", *args], env=env)
    )
    return Issued(done.exit_code, done.stdout.strip(), done.stderr.strip())


async def _echo(client: httpx.AsyncClient, token: str) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"}
    return await client.post("/v1/tools/echo/call", json=ECHO, headers=headers)


def _answered(response: httpx.Response) -> None:
    assert response.status_code == 200 and response.json()["result"] == "hi", response.text


def _refused(response: httpx.Response, code: str, status: int = 401) -> None:
    assert (response.status_code, response.json()["code"]) == (status, code), response.text


async def test_a_cli_token_is_refused_once_its_agent_is_revoked(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    registered = await register(client, admin_headers(settings), "acme", "bot", tools=["echo"])
    assert registered.status_code == 201, registered.text
    issued = await _token_issue(settings, "--tenant", "acme", "--agent", "bot")
    assert issued.code == 0, issued.error
    _answered(await _echo(client, issued.token))

    revoked = await client.delete("/v1/agents/acme/bot", headers=admin_headers(settings))
    assert revoked.status_code == 200

    _refused(await _echo(client, issued.token), "AUTH_REVOKED")
    again = await _token_issue(settings, "--tenant", "acme", "--agent", "bot")
    assert again.code == 1 and "revoked" in again.error and not again.token


async def test_registering_again_with_fewer_rights_refuses_the_wider_tokens(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    first = await register(client, admin_headers(settings), "acme", "wide", tools=["*"])
    wide_cli = await _token_issue(
        settings, "--tenant", "acme", "--agent", "wide", "--scope", "tool:*"
    )
    assert wide_cli.code == 0, wide_cli.error
    assert (await _echo(client, first.json()["token"])).status_code == 200

    narrow = await register(client, admin_headers(settings), "acme", "wide", tools=["echo"])
    assert narrow.status_code == 201

    for old in (first.json()["token"], wide_cli.token):
        _refused(await _echo(client, old), "AUTH_REVOKED")
    assert (await _echo(client, narrow.json()["token"])).json()["result"] == "hi"
    widened = await _token_issue(
        settings, "--tenant", "acme", "--agent", "wide", "--scope", "tool:*"
    )
    assert widened.code == 1 and "beyond" in widened.error and not widened.token


async def test_token_issue_refuses_unregistered_agents_and_rights_beyond_the_registration(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    stranger = await _token_issue(settings, "--tenant", "acme", "--agent", "stranger")
    assert stranger.code == 1 and not stranger.token
    assert stranger.error == (
        "error: agent acme/stranger is not registered: register it first (POST /v1/agents)"
    )

    await register(
        client,
        admin_headers(settings),
        "acme",
        "reader",
        tools=["echo"],
        namespaces={"notes": "read"},
    )
    for scope in ("state:notes:write", "admin"):
        beyond = await _token_issue(
            settings, "--tenant", "acme", "--agent", "reader", "--scope", scope
        )
        assert beyond.code == 1 and not beyond.token, scope
        assert len(beyond.error.splitlines()) == 1, beyond.error
    other_user = await _token_issue(
        settings, "--tenant", "acme", "--agent", "reader", "--obo", "mallory"
    )
    assert other_user.code == 1 and "on behalf of" in other_user.error
    subset = await _token_issue(
        settings, "--tenant", "acme", "--agent", "reader", "--scope", "tool:echo"
    )
    assert subset.code == 0, subset.error
    assert jwt.decode(subset.token, options={"verify_signature": False})["scopes"] == ["tool:echo"]


async def test_no_token_outlives_the_ttl_cap(client: httpx.AsyncClient, settings: Settings) -> None:
    day = settings.token_ttl_max_s
    await register(client, admin_headers(settings), "acme", "longlived", tools=["echo"])
    long_cli = await _token_issue(
        settings, "--tenant", "acme", "--agent", "longlived", "--ttl", str(day + 1)
    )
    assert long_cli.code == 1 and "at most" in long_cli.error and not long_cli.token

    long_registration = await register(
        client, admin_headers(settings), "acme", "longlived", tools=["echo"], token_ttl_s=day + 1
    )
    assert long_registration.json()["code"] == "INVALID_REQUEST"

    # Signed with the right secret, but by something that ignored the cap: refused anyway.
    lax = settings.model_copy(update={"token_ttl_max_s": 30 * 86400})
    stretched = issue_token(lax, tenant="acme", agent="longlived", ttl_s=day + 1)
    _refused(await _echo(client, stretched), "AUTH_INVALID")


@pytest.fixture(scope="module")
def jwks_url() -> Iterator[str]:
    with serving_jwks() as url:
        yield url


@pytest.fixture
async def jwks_client(
    settings: Settings, jwks_url: str, redis: Redis
) -> AsyncIterator[httpx.AsyncClient]:
    configured = settings.model_copy(
        update={"jwks_url": jwks_url, "jwks_issuer": ISSUER, "jwks_audience": AUDIENCE}
    )
    async with in_process_gateway(configured) as http:
        yield http


def _idp_token(**claims: Any) -> str:
    now = int(time.time())
    payload = {
        "sub": "planner",
        "tenant": "acme",
        "scopes": ["tool:echo"],
        "iat": now,
        "exp": now + 300,
        "jti": uuid.uuid4().hex,
        "iss": ISSUER,
        "aud": AUDIENCE,
        **claims,
    }
    payload = {name: value for name, value in payload.items() if value is not None}
    return jwt.encode(payload, KEY, algorithm="RS256", headers={"kid": "idp-1"})


async def test_a_provider_token_for_another_issuer_or_audience_is_refused(
    jwks_client: httpx.AsyncClient,
) -> None:
    assert (await _echo(jwks_client, _idp_token())).json()["result"] == "hi"
    _refused(await _echo(jwks_client, _idp_token(iss="https://evil.example")), "AUTH_INVALID")
    _refused(await _echo(jwks_client, _idp_token(aud="another-app")), "AUTH_INVALID")
    _refused(await _echo(jwks_client, _idp_token(aud=None)), "AUTH_INVALID")


async def test_the_gateway_refuses_to_start_with_jwks_but_no_issuer_or_audience(
    settings: Settings, jwks_url: str
) -> None:
    for missing in ("jwks_issuer", "jwks_audience"):
        update = {"jwks_url": jwks_url, "jwks_issuer": ISSUER, "jwks_audience": AUDIENCE}
        unpinned = settings.model_copy(update={**update, missing: None})
        with pytest.raises(ValueError, match="CONCLAVE_JWKS_ISSUER and CONCLAVE_JWKS_AUDIENCE"):
            async with in_process_gateway(unpinned):
                pass


async def test_a_provider_token_is_revocable_too(
    jwks_client: httpx.AsyncClient, settings: Settings
) -> None:
    """The provider's agent is not registered here, yet revoking it refuses its tokens."""
    token = _idp_token()
    _answered(await _echo(jwks_client, token))
    revoked = await jwks_client.delete("/v1/agents/acme/planner", headers=admin_headers(settings))
    assert revoked.status_code == 404 and "refused from now on" in revoked.json()["message"]
    _refused(await _echo(jwks_client, token), "AUTH_REVOKED")
    _refused(await _echo(jwks_client, _idp_token()), "AUTH_REVOKED")
