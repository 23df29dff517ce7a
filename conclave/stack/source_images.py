"""The config's tool sources prepared on the host before the gateway starts.

A `python` source's requirements become a docker image layer (or, on bwrap, a directory pip
installs into), an `mcp_stdio` source's packages likewise, and on docker a layer with the
host's node: building them can take minutes. `conclave serve` does it here, printing each
step, before the gateway's readiness clock (`ready_timeout_s`) starts; the gateway then finds
every layer and directory prepared (they are cached by content) and only imports and lists
the sources. Preparing has a limit of its own (`source_prepare_timeout_s`); reached, it names
the step it was on and the command that prepares the sources by hand.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import anyio

from gateway import PythonSources, Settings, StdioSources, effective_backend, open_python_sources
from tools import ToolRegistry
from tools.sources import McpStdioSource, PythonSource, load_config

BY_HAND = "conclave sandbox build-image --config {config}"


class SourcePreparationTimeout(RuntimeError):
    """The limit was reached; the message names the step and the command to run by hand."""


def prepare_source_images(settings: Settings, say: Callable[[str], None]) -> None:
    """Prepare every python and mcp_stdio source of `settings.config` (nothing without one, or
    on the inprocess backend). A source that cannot be prepared is said and left to the
    gateway, which refuses it with the same reason; SourcePreparationTimeout past the limit."""
    if settings.config is None:
        return
    sources = load_config(settings.config).source
    wanted = [s for s in sources if isinstance(s, PythonSource | McpStdioSource)]
    settings = effective_backend(settings)
    if not wanted or settings.sandbox.backend == "inprocess":
        return
    step = ["starting"]

    def progress(source: str, line: str) -> None:
        step[0] = f"source {source}: {line}"
        say(step[0])

    async def prepare() -> None:
        with anyio.fail_after(settings.source_prepare_timeout_s):
            assert settings.config is not None
            python: PythonSources = await open_python_sources(
                sources, settings.config.parent, settings, discover=False, say=progress
            )
            for report in python.reports:
                say(f"source {report.name}: cannot be prepared: {report.error}")
            stdio = StdioSources(sources, ToolRegistry())
            await stdio.open(python.sandbox_settings, discover=False, say=progress)
            for name, why in stdio.refused.items():
                say(f"source {name}: cannot be prepared: {why}")

    say(f"preparing {len(wanted)} tool source(s) of {settings.config} ({settings.sandbox.backend})")
    try:
        # In a thread of its own: a stack may be started from code already running an event
        # loop in this thread (an async test, an application), where anyio.run cannot run.
        with ThreadPoolExecutor(1, thread_name_prefix="conclave-prepare") as apart:
            apart.submit(anyio.run, prepare).result()
    except TimeoutError as exc:
        raise SourcePreparationTimeout(
            f"preparing the tool sources took longer than {settings.source_prepare_timeout_s:g}"
            f" s (CONCLAVE_SOURCE_PREPARE_TIMEOUT_S), at: {step[0]}. Prepare them by hand with"
            f" `{BY_HAND.format(config=settings.config)}`, then start again"
        ) from exc
