"""`/mcp`'s resources and prompts: those of the `mcp_http` upstreams, filtered per identity.

`resources/list`, `resources/read`, `prompts/list` and `prompts/get` run as operations of
the pipeline (authenticated, rate limited, audited); which principal sees what is the
`UpstreamSet`'s rule (a source's resources and prompts go with `tool:<source>.*`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from gateway.gateway_error import GatewayError
from gateway.pipeline import RequestContext
from gateway.upstreams import UpstreamSet
from protocol import ErrorCode

UPSTREAM_OPERATIONS = ("resources/list", "resources/read", "prompts/list", "prompts/get")
CAPABILITIES: dict[str, Any] = {
    "tools": {"listChanged": False},
    "resources": {"listChanged": False, "subscribe": False},
    "prompts": {"listChanged": False},
}

Action = Callable[[RequestContext], Awaitable[dict[str, Any]]]


def upstream_operation(upstreams: UpstreamSet, method: str, params: dict[str, Any]) -> Action:
    """The pipeline action that answers `method` for the caller."""

    async def answer(ctx: RequestContext) -> dict[str, Any]:
        principal = ctx.require_principal()
        if method == "resources/list":
            return {"resources": upstreams.resources_for(principal)}
        if method == "prompts/list":
            return {"prompts": upstreams.prompts_for(principal)}
        if method == "resources/read":
            uri = params.get("uri")
            if not isinstance(uri, str) or not uri:
                raise _invalid("resources/read needs params.uri (a string)")
            return await upstreams.read_resource(principal, uri)
        name, arguments = params.get("name"), params.get("arguments")
        if not isinstance(name, str) or not isinstance(arguments, dict | None):
            raise _invalid("prompts/get needs params.name (a string) and optional arguments")
        shown = {str(k): str(v) for k, v in (arguments or {}).items()}
        return await upstreams.get_prompt(principal, name, shown or None)

    return answer


def _invalid(message: str) -> GatewayError:
    return GatewayError.of(ErrorCode.INVALID_REQUEST, message)
