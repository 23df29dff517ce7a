"""`McpSource`: one MCP source (`mcp_stdio` or `mcp_http`) as `/mcp`'s catalog sees it for
one caller: its name, the resources, resource templates and prompts it listed at discovery
(by its own URIs and names), and `send`, one request to it on the caller's behalf (an
`mcp_stdio` server runs in the caller's own sandbox; an `mcp_http` upstream is asked with the
gateway's credential), and `ask`, such a request (a read, a prompt) whose server may ask the
caller's client through a `ClientChannel` (answering, on the 2026-07-28 wire, with a round
of its own: `protocol.InputRound`); an `mcp_stdio` one also has `subscribe`, which
subscribes its server in the caller's sandbox and keeps that sandbox for the subscription
(`tools.calls.SubscriptionHold`).

`sources_for` gives the sources a principal may see (its `tool:` scopes cover the whole
source, `tool:<source>.*`), `mcp_stdio` ones first; the catalog's methods (`catalog`,
`resource_uris`, `completion`, `subscriptions`) all start from it, so one rule decides who
sees what.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from gateway.sources import ClientChannel, StdioSources, UpstreamSet
from protocol import InputRound, Principal
from tools.calls import SubscriptionHold
from tools.sources import dotted_tool_name, served_tool_name

Send = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]
# A read or a prompt whose server may ask the caller's client (`ClientChannel`).
Ask = Callable[[str, dict[str, Any], ClientChannel], Awaitable[dict[str, Any] | InputRound]]
# resources/subscribe of the source's own URI, in the caller's sandbox held as it says.
Subscribe = Callable[[str, SubscriptionHold], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class McpSource:
    name: str
    kind: str  # "mcp_stdio" or "mcp_http"
    separator: str  # between the source's name and a tool's (or prompt's) own name
    resources: Mapping[str, dict[str, Any]]  # by the source's own URI
    templates: Sequence[dict[str, Any]]  # as listed: `uriTemplate` is the source's own
    prompts: Mapping[str, dict[str, Any]]  # by the source's own name
    send: Send
    ask: Ask
    subscribe: Subscribe | None = None  # an mcp_stdio source's; None: an mcp_http one's


def sources_for(
    principal: Principal, upstreams: UpstreamSet, stdio: StdioSources | None
) -> list[McpSource]:
    """The MCP sources `principal` may see, `mcp_stdio` first."""
    found: list[McpSource] = []
    for server in stdio.visible_servers(principal) if stdio is not None else []:
        send: Send = partial(stdio.request, principal, server)  # type: ignore[union-attr]
        ask: Ask = partial(stdio.request_asking, principal, server)  # type: ignore[union-attr]
        subscribe: Subscribe = partial(stdio.subscribe, principal, server)  # type: ignore[union-attr]
        found.append(
            McpSource(
                server.name,
                "mcp_stdio",
                server.source.separator,
                server.resources,
                server.templates,
                server.prompts,
                send,
                ask,
                subscribe,
            )
        )
    for upstream in upstreams.visible(principal):
        found.append(
            McpSource(
                upstream.name,
                "mcp_http",
                upstream.source.separator,
                upstream.resources,
                upstream.templates,
                upstream.prompts,
                upstream.request,
                upstream.ask,
            )
        )
    return found


def source_named(sources: Sequence[McpSource], name: str) -> McpSource | None:
    return next((s for s in sources if s.name == name), None)


def prompt_owner(sources: Sequence[McpSource], name: str) -> tuple[McpSource, str] | None:
    """The source of the prompt served as `name`, and the prompt's own name. A prompt is
    named as the source's tools are (`docs__summarize`, `tools.sources.tool_names`); the
    dotted `<source>.<prompt>` stays an alias."""
    for source in sources:
        for own in source.prompts:
            spellings = (served_tool_name(source.name, own, source.separator),)
            if name in (*spellings, dotted_tool_name(source.name, own)):
                return source, own
    return None


__all__ = ["Ask", "McpSource", "Send", "Subscribe", "prompt_owner", "source_named", "sources_for"]
