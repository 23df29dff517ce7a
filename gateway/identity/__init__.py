"""Who is asking: tokens (HS256 and JWKS/RS256), the admin key, the agent directory, and the
OAuth resource metadata that tells a client where tokens come from."""

from gateway.identity.admin_key import require_admin, shows_traceback
from gateway.identity.agent_directory import AgentDirectory, generation_key, token_revoked
from gateway.identity.jwks import JwksVerifier
from gateway.identity.resource_metadata import (
    MCP_PATH,
    METADATA_PATH,
    bearer_challenge,
    metadata_url,
    resource_metadata,
)
from gateway.identity.tokens import (
    authenticated,
    bearer_token,
    decode_claims,
    issue_token,
    verify_claims,
    verify_token,
)

__all__ = [
    "MCP_PATH",
    "METADATA_PATH",
    "AgentDirectory",
    "JwksVerifier",
    "authenticated",
    "bearer_challenge",
    "bearer_token",
    "decode_claims",
    "generation_key",
    "issue_token",
    "metadata_url",
    "require_admin",
    "resource_metadata",
    "shows_traceback",
    "token_revoked",
    "verify_claims",
    "verify_token",
]
