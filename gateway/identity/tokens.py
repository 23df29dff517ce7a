"""Tokens: issue and verify the JWTs that say who an agent is.

HS256 with the gateway's secret by default. The FastAPI dependency `authenticated` turns the
bearer token into a `Principal` or a SERF `AUTH_*` error; revocation and JWKS live with the
pipeline's authenticate stage, which builds on these two functions.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from typing import Any

import jwt
from fastapi import Request
from pydantic import ValidationError

from gateway.gateway_error import GatewayError
from gateway.settings import Settings
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
    now: float | None = None,
) -> str:
    issued = int(now if now is not None else time.time())
    claims = TokenClaims(
        sub=agent,
        tenant=tenant,
        obo=obo,
        scopes=tuple(scopes),
        iat=issued,
        exp=issued + (ttl_s if ttl_s is not None else settings.token_ttl_s),
        jti=uuid.uuid4().hex,
        iss=settings.token_issuer,
    )
    return jwt.encode(
        claims.model_dump(exclude_none=True),
        settings.secret.get_secret_value(),
        algorithm=ALGORITHM,
    )


def verify_token(settings: Settings, token: str) -> Principal:
    return Principal.from_claims(verify_claims(settings, token))


def verify_claims(settings: Settings, token: str) -> TokenClaims:
    """The token's verified claims (the pipeline needs `iat` for revocation checks)."""
    return decode_claims(
        token,
        settings.secret.get_secret_value(),
        algorithms=[ALGORITHM],
        issuer=settings.token_issuer,
        renew_hint="ask the gateway for a new one",
    )


def decode_claims(
    token: str,
    key: Any,
    *,
    algorithms: list[str],
    renew_hint: str,
    issuer: str | None = None,
    verify_aud: bool = True,
) -> TokenClaims:
    """Verify a JWT with `key` and read its claims; every failure becomes its SERF code.

    Shared by our own HS256 tokens and an identity provider's RS256 ones, so both refuse
    alike. `renew_hint` tells the agent where a new token comes from.
    """
    try:
        payload = jwt.decode(
            token,
            key,
            algorithms=algorithms,
            issuer=issuer,
            options={"require": ["exp", "iat", "sub", "jti"], "verify_aud": verify_aud},
        )
        return TokenClaims.model_validate(payload)
    except jwt.ExpiredSignatureError as exc:
        raise GatewayError.of(
            ErrorCode.AUTH_EXPIRED, f"the token has expired: {renew_hint}"
        ) from exc
    except (jwt.InvalidTokenError, ValidationError) as exc:
        raise GatewayError.of(
            ErrorCode.AUTH_INVALID, f"the token is not valid ({type(exc).__name__})"
        ) from exc


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
    settings: Settings = request.app.state.settings
    return verify_token(settings, bearer_token(request))
