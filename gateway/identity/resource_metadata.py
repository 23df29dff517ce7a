"""How an OAuth-only client finds where to get a token: RFC 9728 metadata and the challenge.

Since MCP's 2025-06-18 revision an MCP server over HTTP is an OAuth 2.1 resource server. A host
that speaks only OAuth (desktop and IDE hosts) connects with no token, reads the 401's
`WWW-Authenticate`, follows its `resource_metadata` to the document built here, and from its
`authorization_servers` gets a token for `resource` (RFC 8707), which the gateway then checks
as the token's audience (`gateway.identity.jwks`).

The resource is `jwks_audience` when an identity provider is configured (the audience its
tokens must name is this gateway's resource URL), else this gateway's `/mcp` as the request
reached it. `authorization_servers` is the provider's issuer; with none configured the document
still says how to present a token (the gateway's own tokens come from `POST /v1/agents`).

The challenge (RFC 6750 section 3): a 401 for a missing token carries no error code, one for
a bad, expired or revoked token `invalid_token`; a tool outside the token's scopes is 403
`insufficient_scope` with the scope that would allow it. `resource_metadata` is added to every
challenge on its way out (`gateway.http.responses.with_resource_metadata`), where the
request's own origin is known.
"""

from __future__ import annotations

from typing import Any

from gateway.config import Settings
from protocol import ErrorCode, SerfError

METADATA_PATH = "/.well-known/oauth-protected-resource"
MCP_PATH = "/mcp"
# What a token's scopes may say (protocol.identity.validate_scope); globs narrow them.
SCOPES_SUPPORTED = ("tool:*", "agent:*", "state:*:read", "state:*:write")


def resource_metadata(settings: Settings, origin: str) -> dict[str, Any]:
    """The RFC 9728 document for this gateway, reached at `origin`."""
    document: dict[str, Any] = {
        "resource": settings.jwks_audience or origin + MCP_PATH,
        "bearer_methods_supported": ["header"],
        "scopes_supported": list(SCOPES_SUPPORTED),
        "resource_name": "Conclave gateway",
    }
    if settings.jwks_issuer:
        document["authorization_servers"] = [settings.jwks_issuer]
    return document


def bearer_challenge(error: SerfError) -> str | None:
    """The `WWW-Authenticate` value for a refusal, or None when the refusal needs none."""
    if error.http_status == 401:
        if error.code is ErrorCode.AUTH_REQUIRED:
            return "Bearer"
        return 'Bearer error="invalid_token"'
    scope = (error.details or {}).get("scope")
    if error.code is ErrorCode.TOOL_NOT_ALLOWED and isinstance(scope, str):
        return f'Bearer error="insufficient_scope", scope="{scope}"'
    return None


def metadata_url(origin: str) -> str:
    """Where the document for this gateway's `/mcp` is, at `origin`."""
    return origin + METADATA_PATH + MCP_PATH
