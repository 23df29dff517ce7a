"""RS256 tokens from an external identity provider, checked against its JWKS.

Enabled by `jwks_url`, which needs `jwks_issuer` and `jwks_audience` beside it: a key set is
often shared by many applications of one provider, so a token must also name our issuer and be
meant for us (its `aud`), or it is AUTH_INVALID. The provider's tokens must carry Conclave's
claims (sub, tenant, scopes, iat, exp, jti) and live no longer than `token_ttl_max_s`. Their
generation (`gen`, absent: 0) is checked at admission like our own tokens': an agent the
gateway has registered or revoked is on a later generation, so a provider token for it is
refused until the provider issues the current `gen`. Keys are fetched (a blocking call, so in
a worker thread) and cached by pyjwt's `PyJWKClient`.
"""

from __future__ import annotations

import anyio
import jwt

from gateway.gateway_error import GatewayError
from gateway.identity.tokens import decode_claims
from gateway.settings import Settings
from protocol import ErrorCode, TokenClaims

ASYMMETRIC = ("RS256", "RS384", "RS512")


class JwksVerifier:
    def __init__(self, settings: Settings) -> None:
        """ValueError (start-up refuses) unless jwks_url comes with an issuer and audience."""
        if not (settings.jwks_url and settings.jwks_issuer and settings.jwks_audience):
            raise ValueError(
                "CONCLAVE_JWKS_URL needs CONCLAVE_JWKS_ISSUER and CONCLAVE_JWKS_AUDIENCE:"
                " set them to the provider's issuer and the audience its tokens name for Conclave"
            )
        self.url = settings.jwks_url
        self.issuer = settings.jwks_issuer
        self.audience = settings.jwks_audience
        self.max_ttl_s = settings.token_ttl_max_s
        self.client = jwt.PyJWKClient(self.url, cache_keys=True, lifespan=300, timeout=5)

    def handles(self, token: str) -> bool:
        """Whether the token is signed with a key from the provider (not the gateway's secret)."""
        try:
            return jwt.get_unverified_header(token).get("alg") in ASYMMETRIC
        except jwt.InvalidTokenError:
            return False

    async def verify(self, token: str) -> TokenClaims:
        try:
            key = await anyio.to_thread.run_sync(self.client.get_signing_key_from_jwt, token)
        except jwt.PyJWKClientConnectionError as exc:
            raise GatewayError.of(
                ErrorCode.UPSTREAM_UNAVAILABLE,
                f"the identity provider's key set at {self.url} is not reachable; retry shortly",
                retry_after_ms=1000,
            ) from exc
        except jwt.PyJWKClientError as exc:
            raise GatewayError.of(
                ErrorCode.AUTH_INVALID, f"the token's key is not in the provider's set ({exc})"
            ) from exc
        return decode_claims(
            token,
            key.key,
            algorithms=list(ASYMMETRIC),
            max_ttl_s=self.max_ttl_s,
            issuer=self.issuer,
            audience=self.audience,
            renew_hint="get a new one from your provider",
        )
