"""Who is asking: tokens (HS256 and JWKS/RS256), the admin key, the agent directory."""

from gateway.identity.admin_key import require_admin, shows_traceback
from gateway.identity.agent_directory import AgentDirectory, generation_key, token_revoked
from gateway.identity.jwks import JwksVerifier
from gateway.identity.tokens import (
    authenticated,
    bearer_token,
    decode_claims,
    issue_token,
    verify_claims,
    verify_token,
)

__all__ = [
    "AgentDirectory",
    "JwksVerifier",
    "authenticated",
    "bearer_token",
    "decode_claims",
    "generation_key",
    "issue_token",
    "require_admin",
    "shows_traceback",
    "token_revoked",
    "verify_claims",
    "verify_token",
]
