"""Stage 1, authenticate: the bearer token becomes a `Principal`, or an AUTH_* refusal.

HS256 tokens are checked with the gateway's secret (`gateway.auth`); when `jwks_url` is set,
RS256 tokens from an external identity provider are checked against its keys. Then the
revocation marker in Redis is read, so a revoked agent is refused on its next request on every
replica.
"""

from __future__ import annotations

from redis.asyncio import Redis

from gateway.agent_directory import revocation_key
from gateway.auth import verify_claims
from gateway.errors import GatewayError
from gateway.jwks import JwksVerifier
from gateway.pipeline.context import RequestContext
from gateway.settings import Settings
from protocol.identity import Principal
from protocol.serf import ErrorCode


def _bearer(header: str) -> str:
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise GatewayError.of(
            ErrorCode.AUTH_REQUIRED,
            "send 'Authorization: Bearer <token>' (POST /v1/agents, or conclave token issue)",
        )
    return token.strip()


class Authenticate:
    name = "authenticate"

    def __init__(self, settings: Settings, redis: Redis, jwks: JwksVerifier | None = None) -> None:
        self.settings = settings
        self.redis = redis
        self.jwks = jwks

    async def __call__(self, ctx: RequestContext) -> None:
        token = _bearer(ctx.headers.get("authorization", ""))
        if self.jwks is not None and self.jwks.handles(token):
            claims = await self.jwks.verify(token)
        else:
            claims = verify_claims(self.settings, token)
        marker = await self.redis.get(revocation_key(claims.tenant, claims.sub))
        if marker is not None and claims.iat <= int(marker):
            raise GatewayError.of(
                ErrorCode.AUTH_REVOKED,
                f"agent {claims.tenant}/{claims.sub} was revoked: an admin must register it again",
            )
        ctx.principal = Principal.from_claims(claims)
        ctx.token_issued_at = claims.iat
