"""`mcp_stdio` tool sources: MCP servers run inside the calling identity's sandbox.

At start-up each source's runtime is prepared on the host (`prepare.prepare_stdio_source`:
its npm packages, and its PyPI packages as a read-only directory for bwrap and process or an
image layer for docker, plus the host's node in the image when it has npm packages). One
discovery sandbox then starts each server and lists its tools, resources and prompts; its
tools are registered under their served names, `<source>.<tool>` an alias
(`tools.sources.tool_names`; allow/deny applied, the source's default intent), their
entrypoint `mcp_stdio:<source>/<tool>`. A source that cannot be prepared, started or listed
is left out with one log line naming it; every other source is served. A served name too
long or claimed by another tool stops the start-up, naming both.

The gateway is each server's MCP client: `StdioSources.call_tool` (which
`gateway.sources.SourceRouter` calls) hands the sandbox pool the caller's invocation, its
arguments as sent, with the `tools/call` message to relay (`tools.calls.ServerMessage`): one
call, run in the caller's own sandbox, whose runner keeps the server warm and relays the
message to it (`sandbox.runner`, a relay request of its own); it reads the server's result.
While someone listens to the call's events, the message carries a `progressToken` and the
runner relays the server's `notifications/progress` and `notifications/message` as the call's
events, and the message names the caller's client capabilities, so the server asks the
caller (sampling, elicitation, roots) only what it declared (`sandbox.runner.runner_wire`);
one that asks anyway what a 2026-07-28 request did not declare has its call stopped and
answered -32021, as an `mcp_http` upstream's is (`client_requests.capability_missing`).
Resources and prompts are served at `/mcp` (`gateway.mcp_state.catalog`) to the principals
whose scopes cover the source (`tool:<source>.*` or `tool:<source>__*`), read in the caller's
sandbox too.
A subscription to one of its resources subscribes the server in the caller's sandbox
(`subscribe`), which the pool then holds and watches (`tools.calls.SubscriptionHold`).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property, partial
from pathlib import Path
from typing import Any

import anyio
from pydantic import BaseModel, ConfigDict, ValidationError

from gateway.config import Settings
from gateway.gateway_error import GatewayError
from gateway.sources.mcp_stdio.prepare_stdio import prepare_stdio_source
from gateway.sources.shared import (
    DISCOVERY_LIMITS,
    ClientChannel,
    UpstreamTool,
    cache_root,
    capability_missing,
    effective_backend,
    packages_layer,
    tool_error,
)
from protocol import ErrorCode, ExitReason, Principal, ToolContext
from sandbox import SandboxError, create_executor, node_layer
from tools import RegisteredTool, ToolRegistry, ToolResult
from tools.calls import (
    CallEvents,
    CallLimits,
    Invocation,
    Outcome,
    Placement,
    ServerMessage,
    StdioServerSpec,
    SubscriptionHold,
    ToolExecutor,
)
from tools.sources import McpStdioSource, ToolSource

log = logging.getLogger("conclave.sources")
CAPABILITY_MISSING = ErrorCode.CLIENT_CAPABILITY_MISSING


@dataclass
class StdioServer:
    """One source's server as discovered: what it serves, by its own names (and URIs)."""

    source: McpStdioSource
    package: str  # the prepared package the runner imports (its runtime's paths)
    tools: dict[str, dict[str, Any]] = field(default_factory=dict)
    resources: dict[str, dict[str, Any]] = field(default_factory=dict)
    templates: list[dict[str, Any]] = field(default_factory=list)  # resource templates
    prompts: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.source.name

    @cached_property
    def spec(self) -> StdioServerSpec:
        """How the runner in a caller's sandbox starts the server."""
        source = self.source
        return StdioServerSpec(self.name, self.package, tuple(source.command), dict(source.env))

    def message(
        self, method: str, params: dict[str, Any], events: CallEvents | None = None
    ) -> ServerMessage:
        """One JSON-RPC request for the server, relayed by the runner. With `events` (someone
        listens to the call), the server is told the caller's client capabilities (it is
        started again if it was told others); without, it is left as it is and asked
        nothing."""
        capabilities = None if events is None else events.capabilities
        return ServerMessage(self.spec, method, params, capabilities)

    @property
    def placement(self) -> Placement:
        """Where a message to the server itself (a read, a prompt, a listing) runs."""
        return Placement.stdio(self.name)

    @property
    def limits(self) -> CallLimits:
        """What a resource read or prompt get may use: the source's default intent."""
        intent = self.source.intent
        return CallLimits(
            intent.memory_mb, intent.cpu_seconds, intent.timeout_ms, intent.max_output_bytes
        )


class StdioSources:
    def __init__(self, sources: Sequence[ToolSource], registry: ToolRegistry) -> None:
        self.sources = [s for s in sources if isinstance(s, McpStdioSource)]
        self.registry = registry
        self.servers: dict[str, StdioServer] = {}
        self.registered: list[str] = []
        self.executor: ToolExecutor | None = None  # the pool serving the callers' sandboxes
        self.refused: dict[str, str] = {}  # source name -> the one line saying why

    def _refuse(self, source: McpStdioSource, why: str) -> None:
        first = why.splitlines()[0] if why else "failed"
        self.refused[source.name] = first
        log.error("tool source %r not served: %s", source.name, first)

    async def open(
        self,
        settings: Settings,
        cache_dir: Path | None = None,
        *,
        discover: bool = True,
        say: Callable[[str, str], None] | None = None,
    ) -> Settings:
        """Prepare, discover and register every source; the sandbox settings that carry their
        runtimes (tool modules, and on docker the image). Without `discover`, only prepare
        them (`refused` names those that failed): what `conclave serve` does before the
        gateway starts. `say(source, line)`: progress."""
        settings = effective_backend(settings)
        if not self.sources:
            return settings
        if settings.sandbox.backend == "inprocess":
            for source in self.sources:
                self._refuse(source, "mcp_stdio sources run in a sandbox; inprocess has none")
            return settings
        cache = cache_dir or cache_root(settings.sandbox.backend)
        on_docker = settings.sandbox.backend == "docker"
        image, modules, ready = settings.sandbox.image, list(settings.tool_modules), []
        for source in self.sources:
            try:
                prepare = partial(prepare_stdio_source, source, cache, install_pypi=not on_docker)
                (say or _say)(source.name, "preparing its server and packages")
                prepared = await anyio.to_thread.run_sync(prepare, abandon_on_cancel=True)
                if on_docker and source.pypi:
                    image = await packages_layer(
                        settings, image, source.name, prepared.digest, source.pypi, cache,
                        partial(say or _say, source.name),
                    )  # fmt: skip
            except Exception as exc:  # one line per source; the others go on
                self._refuse(source, str(exc))
                continue
            modules.append(str(prepared.package_dir))
            ready.append(StdioServer(source, prepared.module))
        if on_docker and any(s.source.npm for s in ready):
            try:
                node_say = partial(say or _say, "node")
                build_node = partial(node_layer, settings.docker_host, image, say=node_say)
                image = await anyio.to_thread.run_sync(build_node, abandon_on_cancel=True)
            except Exception as exc:
                for server in [s for s in ready if s.source.npm]:
                    self._refuse(server.source, str(exc))
                    ready.remove(server)
        sandbox_settings = settings.model_copy(
            update={"tool_modules": tuple(modules), "sandbox_image": image}
        )
        if not discover:
            return sandbox_settings
        await self._discover(ready, sandbox_settings)
        return sandbox_settings

    async def _discover(self, ready: list[StdioServer], settings: Settings) -> None:
        if not ready:
            return
        try:
            sandbox, engines = settings.sandbox, settings.engine_hosts
            executor = create_executor(sandbox, engines, settings.tool_modules)
        except SandboxError as exc:
            for server in ready:
                self._refuse(server.source, f"no sandbox to start it in: {exc}")
            return
        await executor.open()
        try:
            for server in ready:
                try:
                    await self._list(executor, server)
                except GatewayError as exc:
                    self._refuse(server.source, f"{exc.error.code}: {exc.error.message}")
                    continue
                self._register(server)
        finally:
            await executor.aclose()

    async def _list(self, executor: ToolExecutor, server: StdioServer) -> None:
        context = _context(_discovery_principal())
        # A server gets its source's wall-clock limit to start and answer each listing.
        limits = replace(DISCOVERY_LIMITS, timeout_ms=server.source.intent.timeout_ms)
        found = await _relay(executor, server, context, limits, "initialize", {})
        capabilities = found.get("capabilities") or {}
        for tool in await _listed(executor, server, context, limits, "tools/list", "tools"):
            name = str(tool.get("name"))
            if name in server.tools:
                raise GatewayError.of(ErrorCode.TOOL_FAILED, f"it lists tool {name!r} twice")
            if server.source.serves(name):
                server.tools[name] = tool
        if "resources" in capabilities:
            listed = await _listed(executor, server, context, limits, "resources/list", "resources")
            server.resources = {str(r.get("uri")): r for r in listed}
            method, key = "resources/templates/list", "resourceTemplates"
            try:
                templates = await _listed(executor, server, context, limits, method, key)
            except GatewayError:  # a server without templates may refuse the method
                templates = []
            server.templates = [t for t in templates if isinstance(t.get("uriTemplate"), str)]
        if "prompts" in capabilities:
            listed = await _listed(executor, server, context, limits, "prompts/list", "prompts")
            server.prompts = {str(p.get("name")): p for p in listed}

    def _register(self, server: StdioServer) -> None:
        """Register the server's tools under their served names. A name too long
        (`ToolNameError`) or claimed by another tool (`DuplicateToolError`, one line naming
        both) is a configuration error that stops the start-up."""
        tools = []
        for name, found in server.tools.items():
            qualified = server.source.qualified(name)
            try:
                declared = UpstreamTool.model_validate({"inputSchema": {"type": "object"}, **found})
                spec = declared.spec(qualified, server.source.intent)
            except ValidationError as exc:
                why = exc.errors()[0]["msg"]
                self._refuse(server.source, f"its tool {name!r} cannot be served: {why}")
                return
            network = () if server.source.network == "none" else server.source.network
            placement = Placement.stdio(server.name, name)
            tools.append(
                RegisteredTool(
                    spec,
                    _runs_in_sandbox,
                    _ServerArguments,
                    None,
                    placement.entrypoint,
                    network=network,
                    aliases=server.source.aliases(name),
                    placement=placement,
                )
            )
        for tool in tools:
            self.registry.add(tool)
            self.registered.append(tool.name)
        self.servers[server.name] = server
        log.info(
            "mcp_stdio source %r serves %d tools, %d resources, %d prompts",
            server.name,
            len(server.tools),
            len(server.resources),
            len(server.prompts),
        )

    def close(self) -> None:
        """Stop serving the sources' tools (the registry may outlive this gateway)."""
        for name in self.registered:
            self.registry.remove(name)
        self.registered.clear()

    async def call_tool(self, executor: ToolExecutor, invocation: Invocation) -> Outcome:
        """Run `tools/call` on the tool's server in the caller's sandbox."""
        source, tool = invocation.placement.source, invocation.placement.name
        server = self.servers[source]
        params: dict[str, Any] = {"name": tool, "arguments": invocation.arguments}
        if invocation.events is not None:  # the server reports progress only when asked
            params["_meta"] = {"progressToken": invocation.context.trace_id}
        # The caller's invocation, its arguments as sent, with the message the runner relays.
        relay = server.message("tools/call", params, invocation.events)
        outcome = await executor.execute(replace(invocation, relay=relay))
        if outcome.error is not None and outcome.error.code is CAPABILITY_MISSING:
            # Stopped in the sandbox; answered as an mcp_http upstream's call is.
            missing = (outcome.error.details or {}).get("requiredCapabilities") or {}
            return replace(outcome, error=capability_missing(source, invocation.tool, missing))
        if outcome.error is not None or not isinstance(outcome.result, dict):
            return outcome
        result = outcome.result
        if result.get("isError"):
            error = tool_error(source, invocation.tool, result, kind="mcp_stdio source")
            usage = outcome.usage.model_copy(update={"exit_reason": ExitReason.ERROR})
            return Outcome(usage=usage, error=error)
        output = ToolResult.of_mcp(result, value=_value(result))
        return Outcome(usage=outcome.usage, result=output.value, output=output)

    # /mcp's resources and prompts (gateway.mcp_state.catalog)

    def visible_servers(self, principal: Principal) -> list[StdioServer]:
        """The servers whose resources and prompts `principal` may see (and ask them)."""
        if self.executor is None:
            return []
        return [s for s in self.servers.values() if s.source.visible_to(principal)]

    def sees(self, principal: Principal, source: str) -> bool:
        """Whether `principal` sees the source named `source` (its news goes to it)."""
        server = self.servers.get(source)
        return server is not None and server.source.visible_to(principal)

    async def request(
        self, principal: Principal, server: StdioServer, method: str, params: dict[str, Any]
    ) -> dict[str, Any]:
        """One request to `server`, run in `principal`'s own sandbox."""
        if self.executor is None:
            raise GatewayError.of(ErrorCode.NOT_FOUND, f"source {server.name!r} is not served")
        context = _context(principal)
        return await _relay(self.executor, server, context, server.limits, method, params)

    async def request_asking(
        self,
        principal: Principal,
        server: StdioServer,
        method: str,
        params: dict[str, Any],
        channel: ClientChannel,
    ) -> dict[str, Any]:
        """A read or a prompt at `/mcp` on `server`, in `principal`'s own sandbox, whose
        server may ask the caller's client mid-request (`channel.events`, as a call's does:
        the server is told the caller's client capabilities, started again if it was told
        others)."""
        if self.executor is None:
            raise GatewayError.of(ErrorCode.NOT_FOUND, f"source {server.name!r} is not served")
        events = channel.events
        invocation = Invocation(
            f"{server.name}.{method}",
            server.placement.entrypoint,
            params,
            _context(principal),
            server.limits,
            events=events,
            client=channel.client,
            placement=server.placement,
            relay=server.message(method, params, events),
        )
        outcome = await self.executor.execute(invocation)
        if outcome.error is not None and outcome.error.code is CAPABILITY_MISSING:
            missing = (outcome.error.details or {}).get("requiredCapabilities") or {}
            what = str(params.get("name") or params.get("uri") or method)
            raise GatewayError(capability_missing(server.name, what, missing))
        if outcome.error is not None:
            raise GatewayError(outcome.error)
        return outcome.result if isinstance(outcome.result, dict) else {}

    async def subscribe(
        self, principal: Principal, server: StdioServer, uri: str, hold: SubscriptionHold
    ) -> dict[str, Any]:
        """`resources/subscribe` of the server's own `uri` in `principal`'s own sandbox, which
        the pool then keeps for `hold.hold_s` and whose notices go to `hold.heard`."""
        if self.executor is None:
            raise GatewayError.of(ErrorCode.NOT_FOUND, f"source {server.name!r} is not served")
        context, limits = _context(principal), server.limits
        params = {"uri": uri}
        return await _relay(
            self.executor, server, context, limits, "resources/subscribe", params, hold
        )


async def _relay(
    executor: ToolExecutor,
    server: StdioServer,
    context: ToolContext,
    limits: CallLimits,
    method: str,
    params: dict[str, Any],
    hold: SubscriptionHold | None = None,
) -> dict[str, Any]:
    """The server's result for one message, run in `context`'s identity's sandbox."""
    invocation = Invocation(
        f"{server.name}.{method}",
        server.placement.entrypoint,
        params,
        context,
        limits,
        hold=hold,
        placement=server.placement,
        relay=server.message(method, params),
    )
    outcome = await executor.execute(invocation)
    if outcome.error is not None:
        raise GatewayError(outcome.error)
    return outcome.result if isinstance(outcome.result, dict) else {}


async def _listed(
    executor: ToolExecutor,
    server: StdioServer,
    context: ToolContext,
    limits: CallLimits,
    method: str,
    key: str,
) -> list[dict[str, Any]]:
    """Every page of a `*/list` method's items."""
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        params = {"cursor": cursor} if cursor else {}
        page = await _relay(executor, server, context, limits, method, params)
        items += [item for item in page.get(key) or [] if isinstance(item, dict)]
        cursor = page.get("nextCursor")
        if not cursor:
            return items


def _discovery_principal() -> Principal:
    return Principal(
        tenant="conclave",
        agent="source-discovery",
        expires_at=int(time.time()) + 3600,
        token_id=f"discovery-{uuid.uuid4().hex[:8]}",
    )


def _context(principal: Principal) -> ToolContext:
    trace = uuid.uuid4().hex
    return ToolContext(
        principal=principal,
        session_id="mcp-stdio",
        trace_id=trace,
        traceparent=f"00-{trace}-{trace[:16]}-01",
    )


def _text(result: dict[str, Any]) -> str:
    content = result.get("content") or []
    return "\n".join(str(c.get("text", "")) for c in content if c.get("type") == "text")


def _value(result: dict[str, Any]) -> Any:
    """The call's result as our tools answer it: the structured content (unwrapped when the
    server wrapped a plain value in {"result": ...}), else the text, else the content."""
    structured = result.get("structuredContent")
    if isinstance(structured, dict):
        return structured["result"] if set(structured) == {"result"} else structured
    content = result.get("content") or []
    if all(isinstance(c, dict) and c.get("type") == "text" for c in content):
        return _text(result)
    return content


def _say(source: str, line: str) -> None:
    log.info("source %s: %s", source, line)


class _ServerArguments(BaseModel):
    """Any arguments: the server checks them against its own schema."""

    model_config = ConfigDict(extra="allow")


def _runs_in_sandbox(**_: Any) -> Any:
    raise RuntimeError("an mcp_stdio tool runs in its server, through SourceRouter")
