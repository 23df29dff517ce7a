"""`python` tool sources at start-up: prepared on the host, discovered inside a sandbox.

The gateway never imports a user's tool code. For each `python` source of `conclave.toml` it
prepares the source's package directory (and its requirements: a directory bound read-only
for bwrap and process, an image layer for docker), starts one sandbox on the configured
backend, asks it (`tools.sources.source_loader.describe_sources`, run as an ordinary call)
for every source's tool specs, and registers them under their served names
(`tools.sources.tool_names`) with the allow/deny filters applied and the source's default
intent for tools that declare none. A source that cannot be prepared or imported is left out
with one log line naming it and why; every other source is served. A served name too long or
claimed by another tool is a configuration error: the gateway does not start. The sandbox
executor then runs with the
prepared packages among its tool modules and, on docker, the last source layer as its image.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import anyio
from pydantic import ConfigDict, create_model

from gateway.config import Settings
from gateway.sources.python.prepare_python import PreparedSource, prepare_python_source
from gateway.sources.shared import (
    DISCOVERY_LIMITS,
    SourceUnavailable,
    cache_root,
    effective_backend,
    packages_layer,
)
from protocol import Principal, ResourceIntent, ToolContext, ToolSpec
from sandbox import SandboxError, create_executor
from tools import RegisteredTool, ToolRegistry
from tools.calls import Invocation
from tools.sources import DESCRIBE_ENTRYPOINT, PythonSource, ToolSource

log = logging.getLogger("conclave.sources")


@dataclass(frozen=True)
class SourceReport:
    """What one source serves, or the one line saying why it serves nothing."""

    name: str
    kind: str
    tools: tuple[RegisteredTool, ...] = ()
    error: str | None = None


@dataclass(frozen=True)
class PythonSources:
    reports: tuple[SourceReport, ...]
    sandbox_settings: Settings  # the executor's: prepared packages as tool modules, image


async def open_python_sources(
    config_sources: Sequence[ToolSource],
    base_dir: Path,
    settings: Settings,
    cache_dir: Path | None = None,
    *,
    discover: bool = True,
    say: Callable[[str, str], None] | None = None,
) -> PythonSources:
    """Prepare and discover every `python` source (paths relative to base_dir). Without
    `discover`, only prepare them (the reports list the sources that failed): what
    `conclave serve` does before the gateway starts. `say(source, line)`: progress."""
    settings = effective_backend(settings)
    sources = [s for s in config_sources if isinstance(s, PythonSource)]
    if not sources:
        return PythonSources((), settings)
    if settings.sandbox.backend == "inprocess":
        reason = "python sources run in a sandbox; the inprocess backend has none"
        return PythonSources(tuple(_failed(s, reason) for s in sources), settings)
    cache = cache_dir or cache_root(settings.sandbox.backend)
    failed: list[SourceReport] = []
    prepared: list[PreparedSource] = []
    image = settings.sandbox.image
    on_docker = settings.sandbox.backend == "docker"
    for source in sources:
        try:
            prepare = partial(
                prepare_python_source, source, base_dir, cache, install_requirements=not on_docker
            )
            (say or _say)(source.name, "preparing its code and requirements")
            ready = await anyio.to_thread.run_sync(prepare, abandon_on_cancel=True)
            _refuse_module_clash(ready, prepared)
            if on_docker and ready.requirements:
                image = await packages_layer(
                    settings, image, source.name, ready.digest, ready.requirements, cache,
                    partial(say or _say, source.name),
                )  # fmt: skip
        except Exception as exc:  # one line per source; the others go on
            failed.append(_failed(source, str(exc)))
            continue
        prepared.append(ready)
    modules = (*settings.tool_modules, *(str(p.package_dir) for p in prepared))
    sandbox_settings = settings.model_copy(update={"tool_modules": modules, "sandbox_image": image})
    if not discover:
        return PythonSources(tuple(failed), sandbox_settings)
    reports = failed + await _discover(prepared, sandbox_settings)
    return PythonSources(tuple(sorted(reports, key=lambda r: r.name)), sandbox_settings)


def register_sources(registry: ToolRegistry, reports: tuple[SourceReport, ...]) -> None:
    """Add each served source's tools to the gateway's registry. A name (or alias) another
    tool already has is a configuration error that stops the start-up: `DuplicateToolError`,
    one line naming both tools."""
    for report in reports:
        if report.error is not None:
            log.error("tool source %r not served: %s", report.name, report.error)
        for tool in report.tools:
            registry.add(tool)


def _say(source: str, line: str) -> None:
    log.info("source %s: %s", source, line)


def _refuse_module_clash(ready: PreparedSource, before: list[PreparedSource]) -> None:
    top = ready.module.split(".")[0]
    for other in before:
        if other.module.split(".")[0] == top:
            raise SourceUnavailable(
                f"module {top!r} is also source {other.source.name!r}'s: one interpreter "
                "imports one module of a name; rename one"
            )


async def _discover(prepared: list[PreparedSource], settings: Settings) -> list[SourceReport]:
    """Each prepared source's tools, as a sandbox of the configured backend imports them."""
    if not prepared:
        return []
    try:
        # One call: no spare sandbox to start (and wait for at close) after it.
        executor = create_executor(
            settings.sandbox.model_copy(update={"spares": ()}),
            settings.engine_hosts,
            settings.tool_modules,
        )
    except SandboxError as exc:  # no backend here: the sources wait for one
        return [_failed(p.source, f"no sandbox to import it in: {exc}") for p in prepared]
    await executor.open()
    try:
        outcome = await executor.execute(_describe_call())
    finally:
        await executor.aclose()
    if outcome.error is not None:
        why = f"the discovery sandbox failed: {outcome.error.code}: {outcome.error.message}"
        return [_failed(p.source, why) for p in prepared]
    described: dict[str, Any] = outcome.result or {}
    return [_served(p.source, described.get(p.source.name)) for p in prepared]


def _describe_call() -> Invocation:
    principal = Principal(
        tenant="conclave",
        agent="source-discovery",
        expires_at=int(time.time()) + 3600,
        token_id=f"discovery-{uuid.uuid4().hex[:8]}",
    )
    trace = uuid.uuid4().hex
    context = ToolContext(
        principal=principal,
        session_id="source-discovery",
        trace_id=trace,
        traceparent=f"00-{trace}-{trace[:16]}-01",
    )
    return Invocation(
        "conclave.describe_sources", DESCRIBE_ENTRYPOINT, {}, context, DISCOVERY_LIMITS
    )


def _served(source: PythonSource, described: Any) -> SourceReport:
    if not isinstance(described, dict):
        return _failed(source, "the sandbox did not load it")
    if described.get("error"):
        return _failed(source, str(described["error"]))
    served = []
    for entry in described.get("tools") or []:
        own = str(entry["own"])
        if not source.serves(own):
            continue
        # The sandbox filed it under the same name (tools.sources.tool_names): the runner
        # finds it by the name each call carries. Too long a name stops the start-up.
        name = source.qualified(own)
        spec = ToolSpec.model_validate({**entry["spec"], "name": name})
        if spec.intent == ResourceIntent():  # declared none: the source's default
            spec = spec.model_copy(update={"intent": source.intent})
        served.append(_sandboxed_tool(spec, str(entry["entrypoint"]), source, own))
    return SourceReport(source.name, source.kind, tools=tuple(served))


def _sandboxed_tool(
    spec: ToolSpec, entrypoint: str, source: PythonSource, own: str
) -> RegisteredTool:
    """The gateway's entry for a tool that only ever runs in a sandbox (which validates its
    arguments against the schema); the function here is never called."""
    model = create_model(f"{spec.name}_arguments", __config__=ConfigDict(extra="allow"))

    def runs_in_sandbox(**_: Any) -> Any:
        raise RuntimeError(f"{spec.name} runs in a sandbox, never in the gateway")

    network = () if source.network == "none" else source.network
    aliases = source.aliases(own)  # `own` as the source's code names it
    return RegisteredTool(
        spec, runs_in_sandbox, model, None, entrypoint, network=network, aliases=aliases
    )


def _failed(source: PythonSource, why: str) -> SourceReport:
    return SourceReport(source.name, source.kind, error=why.splitlines()[0] if why else "failed")
