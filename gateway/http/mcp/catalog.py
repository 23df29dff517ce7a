"""`/mcp`'s resources and prompts: those of the MCP sources, filtered per identity.

`resources/list`, `resources/read`, `prompts/list` and `prompts/get` run as operations of
the pipeline (authenticated, rate limited, audited). Both kinds of MCP source answer them
with one rule (a source's resources and prompts go with `tool:<source>.*`): the `mcp_stdio`
servers (`StdioSources`, read in the caller's own sandbox) first, then the `mcp_http`
upstreams (`UpstreamSet`), which answer NOT_FOUND for what neither serves.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from gateway.gateway_error import GatewayError
from gateway.pipeline import RequestContext
from gateway.sources import StdioSources, UpstreamSet
from protocol import ErrorCode

UPSTREAM_OPERATIONS = ("resources/list", "resources/read", "prompts/list", "prompts/get")
CAPABILITIES: dict[str, Any] = {
    "tools": {"listChanged": False},
    "resources": {"listChanged": False, "subscribe": False},
    "prompts": {"listChanged": False},
    "logging": {},  # logging/setLevel (gateway.http.mcp.log_levels)
}

Action = Callable[[RequestContext], Awaitable[dict[str, Any]]]


def upstream_operation(
    upstreams: UpstreamSet, stdio: StdioSources | None, method: str, params: dict[str, Any]
) -> Action:
    """The pipeline action that answers `method` for the caller."""

    async def answer(ctx: RequestContext) -> dict[str, Any]:
        principal = ctx.require_principal()
        if method == "resources/list":
            local = stdio.resources_for(principal) if stdio else []
            return {"resources": local + upstreams.resources_for(principal)}
        if method == "prompts/list":
            local = stdio.prompts_for(principal) if stdio else []
            return {"prompts": local + upstreams.prompts_for(principal)}
        if method == "resources/read":
            uri = params.get("uri")
            if not isinstance(uri, str) or not uri:
                raise _invalid("resources/read needs params.uri (a string)")
            read = await stdio.read_resource(principal, uri) if stdio else None
            return read if read is not None else await upstreams.read_resource(principal, uri)
        name, arguments = params.get("name"), params.get("arguments")
        if not isinstance(name, str) or not isinstance(arguments, dict | None):
            raise _invalid("prompts/get needs params.name (a string) and optional arguments")
        shown = {str(k): str(v) for k, v in (arguments or {}).items()} or None
        got = await stdio.get_prompt(principal, name, shown) if stdio else None
        return got if got is not None else await upstreams.get_prompt(principal, name, shown)

    return answer


def _invalid(message: str) -> GatewayError:
    return GatewayError.of(ErrorCode.INVALID_REQUEST, message)
