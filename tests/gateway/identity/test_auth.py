from __future__ import annotations

import time

import jwt
import pytest
from fastapi import Depends, FastAPI
from redis.crc import key_slot

from gateway.budgets import breaker_key, kill_overshoot_of, window_key
from gateway.budgets.admission import bucket_key, tenant_bucket_key
from gateway.config import Settings
from gateway.gateway_error import GatewayError
from gateway.identity import generation_key
from gateway.identity.tokens import authenticated, issue_token, verify_token
from protocol import ErrorCode, Principal

SETTINGS = Settings(redis_url="unix:///nowhere")


def test_issued_token_verifies_to_the_principal() -> None:
    token = issue_token(SETTINGS, tenant="acme", agent="writer", scopes=["tool:*"], obo="alice")
    principal = verify_token(SETTINGS, token)
    assert (principal.tenant, principal.agent, principal.obo) == ("acme", "writer", "alice")
    assert principal.scopes == ("tool:*",)


def _code(token: str, settings: Settings = SETTINGS) -> ErrorCode:
    with pytest.raises(GatewayError) as info:
        verify_token(settings, token)
    return info.value.error.code


def test_tampered_token_is_invalid() -> None:
    token = issue_token(SETTINGS, tenant="acme", agent="writer")
    header, _, signature = token.split(".")
    guessed = "a-guessed-secret-that-is-long-enough-0000"
    forged = jwt.encode({"sub": "root", "tenant": "acme"}, guessed, algorithm="HS256")
    assert _code(f"{header}.{forged.split('.')[1]}.{signature}") is ErrorCode.AUTH_INVALID
    other = Settings(redis_url="unix:///nowhere", secret="another-secret-of-enough-length-0000")
    assert _code(token, other) is ErrorCode.AUTH_INVALID


def test_expired_token_is_expired() -> None:
    token = issue_token(SETTINGS, tenant="acme", agent="w", ttl_s=1, now=time.time() - 60)
    assert _code(token) is ErrorCode.AUTH_EXPIRED


def test_bad_scope_cannot_be_issued() -> None:
    with pytest.raises(ValueError, match="scope"):
        issue_token(SETTINGS, tenant="acme", agent="w", scopes=["everything"])


def test_there_is_no_admin_scope() -> None:
    """The admin API takes the admin key only: a token cannot carry, nor be signed with, admin."""
    with pytest.raises(ValueError, match="scope"):
        issue_token(SETTINGS, tenant="acme", agent="w", scopes=["admin"])
    now = int(time.time())
    claims = {"sub": "w", "tenant": "acme", "scopes": ["admin"], "iat": now, "exp": now + 60}
    signed = jwt.encode(
        {**claims, "jti": "j", "iss": "conclave"}, SETTINGS.secret.get_secret_value()
    )
    assert _code(signed) is ErrorCode.AUTH_INVALID


def test_the_token_carries_its_agents_generation() -> None:
    token = issue_token(SETTINGS, tenant="acme", agent="w", generation=7)
    assert verify_token(SETTINGS, token).generation == 7


def test_no_token_lives_beyond_the_cap() -> None:
    cap = SETTINGS.token_ttl_max_s
    with pytest.raises(ValueError, match=f"at most {cap} s"):
        issue_token(SETTINGS, tenant="acme", agent="w", ttl_s=cap + 1)
    lax = SETTINGS.model_copy(update={"token_ttl_max_s": cap * 30})
    assert (
        _code(issue_token(lax, tenant="acme", agent="w", ttl_s=cap + 1)) is ErrorCode.AUTH_INVALID
    )
    assert (
        verify_token(SETTINGS, issue_token(lax, tenant="acme", agent="w", ttl_s=cap)).agent == "w"
    )


@pytest.mark.anyio
async def test_dependency_answers_serf_envelopes() -> None:
    import httpx

    from gateway.http import install_error_handlers

    app = FastAPI()
    app.state.settings = SETTINGS
    install_error_handlers(app)

    @app.get("/me")
    async def me(principal: Principal = Depends(authenticated)) -> dict[str, str]:
        return {"agent": principal.agent}

    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        missing = await client.get("/me")
        assert missing.status_code == 401
        assert missing.json()["code"] == "AUTH_REQUIRED"
        assert missing.json()["action"] == "reauth"
        bad = await client.get("/me", headers={"Authorization": "Bearer nope"})
        assert bad.json()["code"] == "AUTH_INVALID"
        token = issue_token(SETTINGS, tenant="acme", agent="writer")
        ok = await client.get("/me", headers={"Authorization": f"Bearer {token}"})
        assert ok.json() == {"agent": "writer"}


def test_the_admission_script_touches_one_cluster_slot() -> None:
    """The generation, the rate buckets, the breaker and the latency windows the script
    reads all share the tenant's hash tag."""
    slot = key_slot(generation_key("acme", "bot").encode())
    assert key_slot(bucket_key("acme", "bot", "echo").encode()) == slot
    assert key_slot(tenant_bucket_key("acme").encode()) == slot
    assert key_slot(breaker_key("acme", "echo").encode()) == slot
    assert key_slot(window_key("acme", kill_overshoot_of("echo")).encode()) == slot
    assert key_slot(bucket_key("acme", "other", "state:notes").encode()) == slot
    assert key_slot(generation_key("globex", "bot").encode()) != slot
