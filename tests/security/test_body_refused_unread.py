"""Attack: large bodies from callers the headers already refuse (issue 26).

Before, a route read its body before the pipeline looked at the caller: a stranger with no
token or a bad one, a revoked agent, or a caller over its rate limit had the gateway read a
body up to `max_body_bytes` (and refuse it as too large, not as unauthenticated). Now the
headers are checked first when a body may be large, and the body is never read: each attack
sends 50 MB without a declared length, and the gateway takes at most UNREAD_MAX of it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from redis.asyncio import Redis

from gateway.config import Settings
from tests.helpers import admin_headers, in_process_gateway, registered_token

pytestmark = pytest.mark.anyio

CHUNK = 64 * 1024
BODY_MB = 50
UNREAD_MAX = CHUNK  # what the gateway may have taken of the body before refusing


class CountedBody:
    """A 50 MB request body sent in chunks, counting what the gateway asked for."""

    def __init__(self) -> None:
        self.sent = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        chunk = b'{"arguments": {"message": "' + b"x" * (CHUNK - 28)
        while self.sent < BODY_MB * 1024 * 1024:
            self.sent += len(chunk)
            yield chunk


def _settings(redis_url: str, **limits: float) -> Settings:
    return Settings(
        redis_url=redis_url,
        port=0,
        sandbox_backend="inprocess",
        secret="unread-bodies-secret-" + "x" * 32,
        admin_key="unread-bodies-admin-key",
        **limits,
    )


@pytest.fixture
def settings(redis_url: str) -> Settings:
    return _settings(redis_url, rate_limit_per_s=0.01, rate_limit_burst=2)


@pytest.fixture
async def gateway(settings: Settings, redis: Redis) -> AsyncIterator[httpx.AsyncClient]:
    async with in_process_gateway(settings, "http://localhost") as client:
        yield client


async def _send_large(
    gateway: httpx.AsyncClient, path: str, headers: dict[str, str]
) -> tuple[httpx.Response, int]:
    body = CountedBody()
    answer = await gateway.post(path, content=body, headers=headers)
    return answer, body.sent


@pytest.mark.parametrize("path", ["/v1/tools/echo/call", "/v1/state/notes/commit"])
@pytest.mark.parametrize(
    ("authorization", "code"),
    [(None, "AUTH_REQUIRED"), ("Bearer not-a-token", "AUTH_INVALID")],
)
async def test_a_strangers_large_body_is_refused_unread(
    gateway: httpx.AsyncClient, path: str, authorization: str | None, code: str
) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    answer, sent = await _send_large(gateway, path, headers)
    assert answer.status_code == 401 and answer.json()["code"] == code, answer.text
    assert sent <= UNREAD_MAX, f"the gateway read {sent} bytes of a stranger's body"


async def test_a_revoked_agents_large_body_is_refused_unread(
    settings: Settings, gateway: httpx.AsyncClient
) -> None:
    admin = admin_headers(settings)
    token = await registered_token(gateway, admin, "acme", "gone", tools=["echo"])
    revoked = await gateway.delete("/v1/agents/acme/gone", headers=admin)
    assert revoked.status_code == 200, revoked.text
    answer, sent = await _send_large(
        gateway, "/v1/tools/echo/call", {"Authorization": f"Bearer {token}"}
    )
    assert answer.status_code == 401 and answer.json()["code"] == "AUTH_REVOKED", answer.text
    assert sent <= UNREAD_MAX


async def test_a_rate_limited_callers_large_body_is_refused_unread(
    settings: Settings, gateway: httpx.AsyncClient
) -> None:
    admin = admin_headers(settings)
    token = await registered_token(gateway, admin, "acme", "busy", tools=["echo"])
    bearer = {"Authorization": f"Bearer {token}"}
    for _ in range(settings.rate_limit_burst):  # the agent's burst, spent on small calls
        ok = await gateway.post(
            "/v1/tools/echo/call", json={"arguments": {"message": "hi"}}, headers=bearer
        )
        assert ok.status_code == 200, ok.text
    answer, sent = await _send_large(gateway, "/v1/tools/echo/call", bearer)
    error = answer.json()
    assert answer.status_code == 429 and error["code"] == "RATE_LIMITED", answer.text
    assert error["retryable"] and error["retry_after_ms"] > 0
    assert sent <= UNREAD_MAX
    # The audit says who was refused, as for any refusal.
    audit = await gateway.get(
        "/v1/audit", params={"tenant": "acme", "code": "RATE_LIMITED"}, headers=admin
    )
    assert [r["agent"] for r in audit.json()] == ["busy"], audit.text


@pytest.mark.parametrize(
    ("authorization", "code"),
    [(None, "AUTH_REQUIRED"), ("Bearer not-a-token", "AUTH_INVALID")],
)
async def test_a_strangers_large_mcp_message_is_refused_unread(
    gateway: httpx.AsyncClient, authorization: str | None, code: str
) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    answer, sent = await _send_large(gateway, "/mcp", headers)
    assert answer.status_code == 401, answer.text
    assert answer.json()["error"]["data"]["code"] == code
    assert sent <= UNREAD_MAX, f"the gateway read {sent} bytes of a stranger's MCP message"


async def test_a_tenants_large_bodies_past_its_byte_rate_are_refused_unread(
    redis_url: str, redis: Redis
) -> None:
    """Parsing is what a large body costs: past its tenant's bucket of body bytes (per
    gateway process), a tenant's large bodies are refused RATE_LIMITED before they are read,
    whichever of its agents sends them; its small calls and another tenant's large ones go
    on. On main, every such body was read and parsed (the huge read-set attack: 20x on a
    victim's p99)."""
    settings = _settings(redis_url, tenant_body_bytes_per_s=1_000, tenant_body_bytes_burst=300_000)
    large = {"arguments": {"message": "x" * 200_000}}
    async with in_process_gateway(settings, "http://localhost") as gateway:
        admin = admin_headers(settings)

        async def bearer(tenant: str, agent: str) -> dict[str, str]:
            token = await registered_token(gateway, admin, tenant, agent, tools=["echo"])
            return {"Authorization": f"Bearer {token}"}

        noisy, noisy_too, victim = (
            await bearer("noisy", "a"), await bearer("noisy", "b"), await bearer("good", "v")
        )  # fmt: skip
        first = await gateway.post("/v1/tools/echo/call", json=large, headers=noisy)
        assert first.status_code == 200, first.text  # within the burst
        for headers in (noisy, noisy_too):  # the bucket is the tenant's, not an agent's
            answer, sent = await _send_large(gateway, "/v1/tools/echo/call", headers)
            error = answer.json()
            assert answer.status_code == 429 and error["code"] == "RATE_LIMITED", answer.text
            assert error["details"]["limited_by"] == "tenant_body_bytes"
            assert error["retryable"] and error["retry_after_ms"] >= 90_000  # 100 KB short
            assert sent <= UNREAD_MAX, f"the gateway read {sent} bytes past the byte rate"
        declared = await gateway.post("/v1/tools/echo/call", json=large, headers=noisy)
        assert declared.status_code == 429, declared.text
        small = await gateway.post(
            "/v1/tools/echo/call", json={"arguments": {"message": "hi"}}, headers=noisy
        )
        assert small.status_code == 200, small.text
        other = await gateway.post("/v1/tools/echo/call", json=large, headers=victim)
        assert other.status_code == 200, other.text
        assert other.json()["result"] == large["arguments"]["message"]
