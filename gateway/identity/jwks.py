"""RS256 tokens from an external identity provider, checked against its JWKS.

Enabled by `jwks_url`, which needs `jwks_issuer` and `jwks_audience` beside it: a key set is
often shared by many applications of one provider, so a token must also name our issuer and be
meant for us (its `aud`), or it is AUTH_INVALID. The provider's tokens must carry Conclave's
claims (sub, tenant, scopes, iat, exp, jti) and live no longer than `token_ttl_max_s`. Their
generation (`gen`, absent: 0) is checked at admission like our own tokens': an agent the
gateway has registered or revoked is on a later generation, so a provider token for it is
refused until the provider issues the current `gen`. Keys are fetched (a blocking call, so in
a worker thread) and cached by pyjwt's `PyJWKClient`.

An OAuth authorization server's tokens rarely use Conclave's claim names: `jwks_claims` maps
them (`{"tenant": "org_id"}`), scopes may come as OAuth's space-separated `scope`, and of those
of those only the ones Conclave understands are kept (a provider adds `openid`,
`offline_access`); Conclave's own `scopes` list stays strict. A token without a `jti` is known
by its hash.
"""

from __future__ import annotations

import hashlib
from typing import Any

import anyio
import jwt

from gateway.config import Settings
from gateway.gateway_error import GatewayError
from gateway.identity.tokens import decode_claims
from protocol import ErrorCode, TokenClaims, validate_scope

ASYMMETRIC = ("RS256", "RS384", "RS512")
_MAPPED = ("sub", "tenant", "scopes", "obo")  # the claims `jwks_claims` may rename


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
        self.claim_names = {str(ours): theirs for ours, theirs in settings.jwks_claims.items()}
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
            mapped=self._conclave_claims,
        )

    def _conclave_claims(self, payload: dict[str, Any], token: str) -> dict[str, Any]:
        """The provider's payload under Conclave's claim names."""
        claims = dict(payload)
        for ours in _MAPPED:
            theirs = self.claim_names.get(ours, ours)
            claims.pop(ours, None)
            if theirs in payload:
                claims[ours] = payload[theirs]
        if "scopes" in self.claim_names or ("scopes" not in claims and "scope" in payload):
            # An OAuth server's scopes: keep those Conclave understands. Conclave's own
            # `scopes` list stays strict: a malformed one there makes the token invalid.
            granted = payload.get(self.claim_names.get("scopes", "scope"), ())
            listed = granted.split() if isinstance(granted, str) else granted
            claims["scopes"] = [s for s in listed if isinstance(s, str) and _understood(s)]
        claims.setdefault("jti", hashlib.sha256(token.encode()).hexdigest()[:32])
        return claims


def _understood(scope: str) -> bool:
    try:
        validate_scope(scope)
    except ValueError:
        return False
    return True
