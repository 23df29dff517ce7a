"""OAuth 2.1 resource server metadata (RFC 9728), for MCP hosts that find their token by OAuth.

Served at the well-known path and at its `/mcp` suffix (a client looks for the metadata of
the resource it was given, `/mcp`, first, then at the root), without a token: the document is
what a client without one needs. It names no tool and no tenant.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from gateway.config import app_settings
from gateway.identity import MCP_PATH, METADATA_PATH, resource_metadata

router = APIRouter(tags=["oauth"])


@router.get(METADATA_PATH)
@router.get(METADATA_PATH + MCP_PATH)
async def protected_resource_metadata(request: Request) -> dict[str, Any]:
    """This gateway as an OAuth protected resource: its resource URL, the authorization
    server that issues its tokens, the scopes it understands."""
    origin = f"{request.url.scheme}://{request.url.netloc}"
    return resource_metadata(app_settings(request.app), origin)
