"""`UpstreamSet`: the gateway's `mcp_http` upstreams, and what they add to the gateway.

- Their tools go into the gateway's `ToolRegistry` under their served names, `<source>.<tool>`
  an alias (`tools.sources.tool_names`; the source's allow and deny filters applied, its
  default intent), so listings, scopes and the six stages treat them like every other tool;
  their placement (`tools.calls.Placement.http`) says where they run. An upstream's tools are
  known only once it answers, which may be long after start-up: a tool whose name is too long
  or claimed by another tool is left out with one log line naming both, the others served.
- `call` sends a call to the upstream its placement names (`gateway.sources.SourceRouter`,
  the dispatch stage's executor, routes it here). The budgets need nothing new: latency
  windows and breakers are kept per (tenant, tool), so per upstream tool.
- Their resources and prompts are served at `/mcp`. Who sees them: a principal whose
  `tool:` scopes cover every tool of the source (`tool:<source>.*`, `tool:<source>__*` or
  `tool:*`) sees and may
  read its resources and get its prompts; to anyone else they do not exist (NOT_FOUND).
  Prompts are named `<source>.<prompt>`; resources keep their upstream URIs unless two
  sources serve one (`gateway.mcp_state.resource_uris`).
- With `events` set, each upstream also has an `UpstreamListener` (its news: resource
  updates for subscriptions, list changes, after which its tools are served as listed anew).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import anyio
from anyio.abc import TaskStatus
from pydantic import BaseModel, ConfigDict

from gateway.gateway_error import GatewayError
from gateway.sources.mcp_http.http_upstream import HttpUpstream
from gateway.sources.mcp_http.upstream_events import SourceEvents, UpstreamListener
from protocol import ErrorCode, Principal
from tools import DuplicateToolError, RegisteredTool, ToolRegistry
from tools.calls import Invocation, Outcome, Placement
from tools.sources import McpHttpSource, ToolNameError, ToolSource

log = logging.getLogger("conclave.upstreams")


class UpstreamSet:
    def __init__(
        self,
        sources: Sequence[ToolSource],
        registry: ToolRegistry,
        *,
        timeout_s: float = 10.0,
        retry_s: float = 10.0,
        events: SourceEvents | None = None,
    ) -> None:
        self.registry = registry
        self.upstreams = {
            s.name: HttpUpstream(s, timeout_s=timeout_s, retry_s=retry_s)
            for s in sources
            if isinstance(s, McpHttpSource)
        }
        self.events = events  # where the upstreams' news goes; None: nobody listens
        self.listeners: dict[str, UpstreamListener] = {}
        self._registered: dict[str, str] = {}  # served tool name -> its upstream's name

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Keep every upstream connected; started once each has been tried once."""
        try:
            async with anyio.create_task_group() as held:
                async with anyio.create_task_group() as first_tries:
                    for upstream in self.upstreams.values():
                        first_tries.start_soon(held.start, upstream.run, self._register)
                if self.events is not None:
                    for upstream in self.upstreams.values():
                        listener = UpstreamListener(upstream, self.events, self._register)
                        self.listeners[upstream.name] = listener
                        held.start_soon(listener.run)
                task_status.started()
        finally:  # the registry may outlive this gateway (tests build many)
            for name in self._registered:
                self.registry.remove(name)

    def _register(self, upstream: HttpUpstream) -> None:
        """Serve the tools `upstream` lists now: new ones added, changed ones replaced, and
        the ones it no longer lists withdrawn (a call of one is refused: TOOL_NOT_FOUND)."""
        listed: set[str] = set()
        for name, found in upstream.tools.items():
            try:
                qualified = upstream.source.qualified(name)
            except ToolNameError as exc:
                log.error("mcp_http source %r: %s", upstream.name, exc)
                continue
            spec = found.spec(qualified, upstream.source.intent)
            if qualified in self._registered:
                listed.add(qualified)
                served = self.registry.get(qualified)
                if served is None or served.spec == spec:
                    continue  # registered at an earlier discovery, unchanged
                self.registry.remove(qualified)  # changed: served as it is now
                del self._registered[qualified]
            placement = Placement.http(upstream.name, name)
            tool = RegisteredTool(
                spec=spec,
                function=_runs_upstream,
                arguments_model=_UpstreamArguments,
                context_param=None,
                entrypoint=placement.entrypoint,
                aliases=upstream.source.aliases(name),
                placement=placement,
            )
            try:
                self.registry.add(tool)
            except DuplicateToolError as exc:
                log.error("mcp_http source %r: %s", upstream.name, exc)
                continue
            self._registered[qualified] = upstream.name
            listed.add(qualified)
        for dropped in [n for n, o in self._registered.items() if o == upstream.name]:
            if dropped not in listed:
                self.registry.remove(dropped)
                del self._registered[dropped]
        log.info(
            "mcp_http source %r serves %d tools, %d resources, %d prompts",
            upstream.name,
            len(upstream.tools),
            len(upstream.resources),
            len(upstream.prompts),
        )

    async def call(self, source: str, invocation: Invocation) -> Outcome:
        """The call on the upstream `source`, whose tool the invocation was resolved to."""
        upstream = self.upstreams.get(source)
        if upstream is None:  # its source was withdrawn since the call was authorized
            raise GatewayError.of(
                ErrorCode.TOOL_NOT_FOUND,
                f"tool {invocation.tool!r}: its mcp_http source {source!r} is no longer served",
            )
        return await upstream.call(invocation)

    def visible(self, principal: Principal) -> list[HttpUpstream]:
        """The upstreams whose resources and prompts `principal` may see (and ask them)."""
        return [u for u in self.upstreams.values() if u.source.visible_to(principal)]

    def sees(self, principal: Principal, source: str) -> bool:
        upstream = self.upstreams.get(source)
        return upstream is not None and upstream.source.visible_to(principal)

    def listener_of(self, source: str) -> UpstreamListener:
        """The listener that subscribes on `source`; refused when the upstream cannot tell
        the gateway of updates (it issues no session, or does not take subscriptions)."""
        listener = self.listeners.get(source)
        if listener is None or not listener.offers_subscriptions:
            raise GatewayError.of(
                ErrorCode.INVALID_REQUEST,
                f"source {source!r} does not offer resource subscriptions",
                details={"source": source},
            )
        return listener


class _UpstreamArguments(BaseModel):
    """Any arguments: the upstream checks them against its own schema."""

    model_config = ConfigDict(extra="allow")


def _runs_upstream(**_: Any) -> Any:
    raise RuntimeError("an mcp_http tool runs on its upstream, through SourceRouter")
