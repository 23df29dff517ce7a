"""Stage 1, authenticate: the bearer token becomes a `Principal`, or an AUTH_* refusal.

HS256 tokens are checked with the gateway's secret (`gateway.identity.tokens`); when
`jwks_url` is set, RS256 tokens from an external identity provider are checked against its
keys. Verified claims are kept in a small cache keyed by the token, so a busy agent's token
is decoded once, and re-checked for expiry on every request.

Revocation (the token's generation against its agent's current one in Redis, so it holds
across replicas from the next request on) is checked in the same Redis round trip as the rate
limit, by the budget stage's admission script:
one round trip per request instead of two. A request refused before the budget stage (say,
a tool outside the allow-list) is refused for that reason even if its agent was revoked.
"""

from __future__ import annotations

import time
from collections import OrderedDict

from gateway.config import Settings
from gateway.gateway_error import GatewayError
from gateway.identity import JwksVerifier, verify_claims
from gateway.pipeline.context import RequestContext
from protocol import ErrorCode, Principal, TokenClaims

_CACHE_SIZE = 4096


def _bearer(header: str) -> str:
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise GatewayError.of(
            ErrorCode.AUTH_REQUIRED,
            "send 'Authorization: Bearer <token>' (POST /v1/agents, or conclave token issue)",
        )
    return token.strip()


class AuthenticateStage:
    name = "authenticate"

    def __init__(self, settings: Settings, jwks: JwksVerifier | None = None) -> None:
        self.settings = settings
        self.jwks = jwks
        self._verified: OrderedDict[str, tuple[TokenClaims, Principal]] = OrderedDict()

    async def __call__(self, ctx: RequestContext) -> None:
        token = _bearer(ctx.headers.get("authorization", ""))
        cached = self._verified.get(token)
        if cached is not None and cached[0].exp > time.time():
            claims, principal = cached
        else:
            claims = await self._verify(token)
            principal = Principal.from_claims(claims)
            self._verified[token] = (claims, principal)
            if len(self._verified) > _CACHE_SIZE:
                self._verified.popitem(last=False)
        ctx.principal = principal
        ctx.oauth = self.jwks is not None and claims.iss == self.jwks.issuer

    async def _verify(self, token: str) -> TokenClaims:
        if self.jwks is not None and self.jwks.handles(token):
            return await self.jwks.verify(token)
        return verify_claims(self.settings, token)
