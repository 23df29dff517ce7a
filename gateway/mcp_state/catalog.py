"""`/mcp`'s resources, resource templates, prompts, completions and subscriptions: those of
the MCP sources, filtered per identity.

Each method runs as an operation of the pipeline (authenticated, rate limited, audited).
Both kinds of MCP source answer with one rule (`mcp_sources`: a source's resources and
prompts go with `tool:<source>.*`; to anyone else they do not exist, NOT_FOUND): the
`mcp_stdio` servers (asked in the caller's own sandbox) and the `mcp_http` upstreams.
Resource URIs are kept apart per source (`resource_uris`), a concrete URI matching a
source's template is read from that source (`resource_templates`), completions go to the
source that owns the prompt or template (`completion`), subscriptions are the identity's,
in Redis (`subscriptions`).

A read and a prompt reach their caller's client as a tool call does (`ClientChannel`, from
the request's context): a server's sampling, elicitation or roots request mid-request goes
to the client on the request's event stream (or as a round of `/mcp`'s, for a 2026-07-28
client), and an upstream's own round on the 2026-07-28 wire is the action's result
(`protocol.InputRound`), relayed by `/mcp`, its retry's answers (`ctx.client`) handed
back to that upstream.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from gateway.gateway_error import GatewayError
from gateway.mcp_state.completion import complete
from gateway.mcp_state.mcp_sources import McpSource, prompt_owner, sources_for
from gateway.mcp_state.resource_uris import listed_resources, listed_templates, resolve
from gateway.mcp_state.subscriptions import ResourceSubscriptions
from gateway.pipeline import RequestContext
from gateway.sources import ClientChannel, StdioSources, UpstreamSet
from protocol import ErrorCode, InputRound, client_capabilities
from tools.calls import NO_CLIENT, CallerClient
from tools.sources import served_tool_name

UPSTREAM_OPERATIONS = (
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
)
CAPABILITIES: dict[str, Any] = {
    "tools": {"listChanged": True},
    "resources": {"listChanged": True, "subscribe": True},
    "prompts": {"listChanged": True},
    "completions": {},
    "logging": {},  # logging/setLevel (gateway.mcp_state.log_levels)
}

Action = Callable[[RequestContext], Awaitable[dict[str, Any] | InputRound]]
# The methods whose server may ask the caller's client while it answers.
ASKING_OPERATIONS = ("resources/read", "prompts/get")


@dataclass(frozen=True)
class McpCatalog:
    """What `/mcp` serves of the MCP sources (built once, in `gateway.assembly`)."""

    upstreams: UpstreamSet
    stdio: StdioSources | None
    subscriptions: ResourceSubscriptions

    def operation(self, method: str, params: dict[str, Any]) -> Action:
        """The pipeline action that answers `method` for the caller."""

        async def answer(ctx: RequestContext) -> dict[str, Any] | InputRound:
            principal = ctx.require_principal()
            sources = sources_for(principal, self.upstreams, self.stdio)
            if method == "resources/list":
                return {"resources": listed_resources(sources)}
            if method == "resources/templates/list":
                return {"resourceTemplates": listed_templates(sources)}
            if method == "prompts/list":
                return {"prompts": _prompts(sources)}
            if method == "completion/complete":
                return await complete(sources, params)
            if method in ("resources/read", "resources/subscribe", "resources/unsubscribe"):
                uri = params.get("uri")
                if not isinstance(uri, str) or not uri:
                    raise _invalid(f"{method} needs params.uri (a string)")
                if method == "resources/read":
                    source, own = resolve(sources, uri)
                    return await source.ask(method, {"uri": own}, _channel(ctx))
                on = method == "resources/subscribe"
                return await self.subscriptions.subscribe(principal, sources, uri, on=on)
            return await _get_prompt(sources, params, _channel(ctx))

        return answer


def _prompts(sources: list[McpSource]) -> list[dict[str, Any]]:
    return [
        {**p, "name": served_tool_name(s.name, n, s.separator)}
        for s in sources
        for n, p in s.prompts.items()
    ]


def _channel(ctx: RequestContext) -> ClientChannel:
    """How the request's server may ask its client (what a tool call's invocation carries)."""
    client = ctx.client or NO_CLIENT
    kept = None if client.declared is None else client_capabilities(client.declared)
    return ClientChannel(ctx.events, CallerClient(kept, client.answer))


async def _get_prompt(
    sources: list[McpSource], params: dict[str, Any], channel: ClientChannel
) -> dict[str, Any] | InputRound:
    name, arguments = params.get("name"), params.get("arguments")
    if not isinstance(name, str) or not isinstance(arguments, dict | None):
        raise _invalid("prompts/get needs params.name (a string) and optional arguments")
    owner = prompt_owner(sources, name)
    if owner is None:
        raise GatewayError.of(
            ErrorCode.NOT_FOUND, f"no prompt {name[:100]!r} here; prompts/list names them"
        )
    source, own = owner
    asked: dict[str, Any] = {"name": own}
    if arguments:
        asked["arguments"] = {str(k): str(v) for k, v in arguments.items()}
    return await source.ask("prompts/get", asked, channel)


def _invalid(message: str) -> GatewayError:
    return GatewayError.of(ErrorCode.INVALID_REQUEST, message)


__all__ = ["ASKING_OPERATIONS", "CAPABILITIES", "UPSTREAM_OPERATIONS", "McpCatalog"]
