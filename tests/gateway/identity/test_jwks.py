"""RS256 tokens from an external identity provider, checked against its JWKS over real HTTP."""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterator
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from gateway.config import Settings
from gateway.gateway_error import GatewayError
from gateway.identity.jwks import JwksVerifier
from gateway.identity.tokens import issue_token
from gateway.pipeline import AuthenticateStage, RequestContext
from protocol import ErrorCode
from tests.identity_provider import AUDIENCE, ISSUER, KEY, serving_jwks

pytestmark = pytest.mark.anyio

OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _settings(jwks_url: str) -> Settings:
    return Settings(
        redis_url="unix:///unused", jwks_url=jwks_url, jwks_issuer=ISSUER, jwks_audience=AUDIENCE
    )


@pytest.fixture(scope="module")
def jwks_url() -> Iterator[str]:
    with serving_jwks() as url:
        yield url


def _idp_token(key: Any = KEY, kid: str = "idp-1", ttl: int = 300, **extra: Any) -> str:
    now = int(time.time())
    claims = {
        "sub": "planner",
        "tenant": "acme",
        "scopes": ["tool:echo"],
        "iat": now,
        "exp": now + ttl,
        "jti": uuid.uuid4().hex,
        "iss": ISSUER,
        "aud": AUDIENCE,
        **extra,
    }
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": kid})


async def _authenticate(settings: Settings, token: str) -> RequestContext:
    stage = AuthenticateStage(settings, JwksVerifier(settings))
    ctx = RequestContext("http", "test", {"authorization": f"Bearer {token}"})
    await stage(ctx)
    return ctx


async def _code(settings: Settings, token: str) -> ErrorCode:
    with pytest.raises(GatewayError) as info:
        await _authenticate(settings, token)
    return info.value.error.code


async def test_a_provider_token_becomes_the_principal(jwks_url: str) -> None:
    settings = _settings(jwks_url)
    ctx = await _authenticate(settings, _idp_token())
    assert ctx.principal is not None
    assert (ctx.principal.tenant, ctx.principal.agent, ctx.principal.scopes) == (
        "acme",
        "planner",
        ("tool:echo",),
    )
    own = issue_token(settings, tenant="acme", agent="local")  # HS256 tokens still work
    assert (await _authenticate(settings, own)).principal is not None


async def test_forged_unknown_and_expired_provider_tokens_are_refused(jwks_url: str) -> None:
    settings = _settings(jwks_url)
    assert await _code(settings, _idp_token(key=OTHER_KEY)) is ErrorCode.AUTH_INVALID
    assert await _code(settings, _idp_token(kid="someone-else")) is ErrorCode.AUTH_INVALID
    assert await _code(settings, _idp_token(ttl=-60)) is ErrorCode.AUTH_EXPIRED
    assert await _code(settings, _idp_token(scopes=["root"])) is ErrorCode.AUTH_INVALID


async def test_provider_tokens_for_another_issuer_or_audience_or_too_long_are_refused(
    jwks_url: str,
) -> None:
    settings = _settings(jwks_url)
    assert await _code(settings, _idp_token(iss="https://evil.example")) is ErrorCode.AUTH_INVALID
    assert await _code(settings, _idp_token(aud="another-app")) is ErrorCode.AUTH_INVALID
    unaddressed = _idp_token()
    claims = jwt.decode(unaddressed, options={"verify_signature": False})
    del claims["aud"]
    bare = jwt.encode(claims, KEY, algorithm="RS256", headers={"kid": "idp-1"})
    assert await _code(settings, bare) is ErrorCode.AUTH_INVALID
    too_long = _idp_token(ttl=settings.token_ttl_max_s + 1)
    assert await _code(settings, too_long) is ErrorCode.AUTH_INVALID


def test_jwks_without_an_issuer_and_audience_is_refused(jwks_url: str) -> None:
    for missing in ("jwks_issuer", "jwks_audience"):
        unpinned = _settings(jwks_url).model_copy(update={missing: None})
        with pytest.raises(ValueError, match="CONCLAVE_JWKS_ISSUER and CONCLAVE_JWKS_AUDIENCE"):
            JwksVerifier(unpinned)


async def test_an_unreachable_key_set_is_a_transient_failure() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = _settings(f"http://127.0.0.1:{port}/jwks")
    assert await _code(settings, _idp_token()) is ErrorCode.UPSTREAM_UNAVAILABLE
