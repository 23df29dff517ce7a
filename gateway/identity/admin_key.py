"""Admin-only routes: the caller must present the gateway's admin key."""

from __future__ import annotations

import hmac

from fastapi import Request

from gateway.gateway_error import GatewayError
from gateway.settings import Settings
from protocol import ADMIN_KEY_HEADER, ErrorCode


async def require_admin(request: Request) -> None:
    """FastAPI dependency: ADMIN_REQUIRED unless the admin key header matches."""
    settings: Settings = request.app.state.settings
    presented = request.headers.get(ADMIN_KEY_HEADER, "")
    expected = settings.admin_key.get_secret_value()
    if not hmac.compare_digest(presented.encode(), expected.encode()):
        raise GatewayError.of(
            ErrorCode.ADMIN_REQUIRED,
            f"this route is for admins: send the admin key in {ADMIN_KEY_HEADER}"
            " (CONCLAVE_ADMIN_KEY)",
        )
