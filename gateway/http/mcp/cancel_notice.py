"""`notifications/cancelled` at `/mcp`: the caller no longer wants one of its calls.

The notice passes the pipeline like any message (so it is authenticated, rate limited and
audited); its action publishes a cancel for the call the caller's own identity made with
that request id (`gateway.cancellation.InflightCalls`), wherever that call runs. A notice
naming no call of the caller's (unknown, finished, another identity's id) changes nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from gateway.cancellation import InflightCalls, call_key
from gateway.pipeline import RequestContext

CANCELLED_METHOD = "notifications/cancelled"


def cancel_notice(
    inflight: InflightCalls, params: dict[str, Any]
) -> Callable[[RequestContext], Awaitable[dict[str, Any]]]:
    """The action of a `notifications/cancelled` with `params` (requestId, reason)."""
    request_id = params.get("requestId")
    reason = params.get("reason")

    async def cancel(ctx: RequestContext) -> dict[str, Any]:
        # A JSON-RPC id is a string or a number (bool is an int to Python, not to JSON-RPC).
        if isinstance(request_id, str | int) and not isinstance(request_id, bool):
            said = reason if isinstance(reason, str) else None
            await inflight.cancel(call_key(ctx.require_principal(), request_id), said)
        return {}

    return cancel


__all__ = ["CANCELLED_METHOD", "cancel_notice"]
