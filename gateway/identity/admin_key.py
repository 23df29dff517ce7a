"""Admin-only routes: the caller must present the gateway's admin key."""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from fastapi import Request

from gateway.config import Settings, app_settings
from gateway.gateway_error import GatewayError
from protocol import ADMIN_KEY_HEADER, DEBUG_HEADER, ErrorCode


def holds_admin_key(headers: Mapping[str, str], settings: Settings) -> bool:
    """Whether the request carries the gateway's admin key (compared in constant time)."""
    presented = headers.get(ADMIN_KEY_HEADER, "")
    expected = settings.admin_key.get_secret_value()
    return hmac.compare_digest(presented.encode(), expected.encode())


def shows_traceback(headers: Mapping[str, str], settings: Settings) -> bool:
    """Whether a failing tool's own traceback goes back to this caller: it asked for it
    (`X-Conclave-Debug: 1`) and it is the tools' author. The gateway's tools (built-ins and
    `conclave.toml`'s sources) are the operator's code, so their author is whoever holds the
    admin key; an agent's token alone, of any tenant, never gets one."""
    return headers.get(DEBUG_HEADER, "") == "1" and holds_admin_key(headers, settings)


async def require_admin(request: Request) -> None:
    """FastAPI dependency: ADMIN_REQUIRED unless the admin key header matches."""
    settings: Settings = app_settings(request.app)
    if not holds_admin_key(request.headers, settings):
        raise GatewayError.of(
            ErrorCode.ADMIN_REQUIRED,
            f"this route is for admins: send the admin key in {ADMIN_KEY_HEADER}"
            " (CONCLAVE_ADMIN_KEY)",
        )
