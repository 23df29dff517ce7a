"""Tokens: issue and verify the JWTs that say who an agent is.

HS256 with the gateway's secret by default. Every token carries its agent's generation (`gen`,
checked against the current one at admission, so every token is revocable) and lives at most
`token_ttl_max_s`: issuing refuses a longer lifetime and verifying refuses a token whose
exp - iat is longer, whoever signed it. The FastAPI dependency `authenticated` turns the bearer
token into a `Principal` or a SERF `AUTH_*` error (signature and lifetime only: the generation
check needs Redis and lives in the pipeline's budget stage).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import jwt
from fastapi import Request
from pydantic import ValidationError

from gateway.config import Settings, app_settings
from gateway.gateway_error import GatewayError
from protocol import ErrorCode, Principal, TokenClaims

ALGORITHM = "HS256"


def issue_token(
    settings: Settings,
    *,
    tenant: str,
    agent: str,
    scopes: Iterable[str] = (),
    obo: str | None = None,
    ttl_s: int | None = None,
    generation: int = 0,
    now: float | None = None,
    chain: str = "",
) -> str:
    """Sign a token; ValueError for a bad scope or a lifetime above `token_ttl_max_s`."""
    ttl = ttl_s if ttl_s is not None else settings.token_ttl_s
    if ttl > settings.token_ttl_max_s:
        raise ValueError(
            f"a token may live at most {settings.token_ttl_max_s} s (CONCLAVE_TOKEN_TTL_MAX_S);"
            f" asked for {ttl} s"
        )
    issued = int(now if now is not None else time.time())
    claims = TokenClaims(
        sub=agent,
        tenant=tenant,
        obo=obo,
        scopes=tuple(scopes),
        iat=issued,
        exp=issued + ttl,
        jti=uuid.uuid4().hex,
        iss=settings.token_issuer,
        gen=generation,
        chain=chain,
    )
    payload = claims.model_dump(exclude_none=True)
    if not chain:
        del payload["chain"]  # only a task token has one: every other stays as it was
    return jwt.encode(
        payload,
        settings.secret.get_secret_value(),
        algorithm=ALGORITHM,
    )


def verify_token(settings: Settings, token: str) -> Principal:
    return Principal.from_claims(verify_claims(settings, token))


def verify_claims(settings: Settings, token: str) -> TokenClaims:
    """The token's verified claims (the pipeline needs `gen` for the revocation check)."""
    return decode_claims(
        token,
        settings.secret.get_secret_value(),
        algorithms=[ALGORITHM],
        max_ttl_s=settings.token_ttl_max_s,
        issuer=settings.token_issuer,
        renew_hint="ask the gateway for a new one",
    )


def decode_claims(
    token: str,
    key: Any,
    *,
    algorithms: list[str],
    max_ttl_s: int,
    renew_hint: str,
    issuer: str | None = None,
    audience: str | None = None,
    mapped: Callable[[dict[str, Any], str], dict[str, Any]] | None = None,
) -> TokenClaims:
    """Verify a JWT with `key` and read its claims; every failure becomes its SERF code.

    Shared by our own HS256 tokens and an identity provider's RS256 ones, so both refuse
    alike. A token whose lifetime (exp - iat) exceeds `max_ttl_s` is invalid. `audience`, when
    given, must be in the token's `aud`. `renew_hint` tells the agent where a new token comes
    from. `mapped` turns a provider's payload (and the token) into Conclave's claims.
    """
    required = ["exp", "iat"] + (["aud"] if audience is not None else [])
    required += ["sub", "jti"] if mapped is None else []
    try:
        payload = jwt.decode(
            token,
            key,
            algorithms=algorithms,
            issuer=issuer,
            audience=audience,
            options={"require": required},
        )
        claims = TokenClaims.model_validate(payload if mapped is None else mapped(payload, token))
    except jwt.ExpiredSignatureError as exc:
        raise GatewayError.of(
            ErrorCode.AUTH_EXPIRED, f"the token has expired: {renew_hint}"
        ) from exc
    except (jwt.InvalidTokenError, ValidationError) as exc:
        raise GatewayError.of(
            ErrorCode.AUTH_INVALID, f"the token is not valid ({type(exc).__name__})"
        ) from exc
    if claims.exp - claims.iat > max_ttl_s:
        raise GatewayError.of(
            ErrorCode.AUTH_INVALID,
            f"the token lives {claims.exp - claims.iat} s, longer than the gateway's cap of"
            f" {max_ttl_s} s: {renew_hint}",
        )
    return claims


def bearer_token(request: Request) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise GatewayError.of(
            ErrorCode.AUTH_REQUIRED, "send 'Authorization: Bearer <token>' (conclave token issue)"
        )
    return token.strip()


async def authenticated(request: Request) -> Principal:
    """FastAPI dependency: the caller's principal, or a SERF AUTH_* error."""
    settings: Settings = app_settings(request.app)
    return verify_token(settings, bearer_token(request))
