"""RS256 tokens from an external identity provider, checked against its JWKS.

Enabled by `jwks_url`. The provider's tokens must carry Conclave's claims (sub, tenant,
scopes, iat, exp, jti); its key set is the trust anchor, so the issuer is not pinned. Keys
are fetched (a blocking call, so in a worker thread) and cached by pyjwt's `PyJWKClient`.
"""

from __future__ import annotations

import anyio
import jwt

from gateway.gateway_error import GatewayError
from gateway.identity.tokens import decode_claims
from protocol import ErrorCode, TokenClaims

ASYMMETRIC = ("RS256", "RS384", "RS512")


class JwksVerifier:
    def __init__(self, url: str) -> None:
        self.url = url
        self.client = jwt.PyJWKClient(url, cache_keys=True, lifespan=300, timeout=5)

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
            verify_aud=False,
            renew_hint="get a new one from your provider",
        )
