"""Which `ToolExecutor` the gateway dispatches to: the one place that decides.

Tools run in the sandbox pool on `settings.sandbox_backend` (docker, bwrap, process, or
auto: the strongest available), or in the gateway's own worker threads for `inprocess` (no
isolation: the gateway bench uses it to measure the gateway's own overhead). `create_reaper`
gives the lifespan the pool's idle reaper.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from gateway.settings import Settings
from sandbox.executor import ToolExecutor
from sandbox.factory import create_executor as create_sandbox_pool
from sandbox.inprocess import InProcessExecutor
from sandbox.pool import SandboxPool
from tools.registry import ToolRegistry


def create_executor(settings: Settings, registry: ToolRegistry) -> ToolExecutor:
    if settings.sandbox_backend == "inprocess":
        return InProcessExecutor(registry)
    # the sandbox's runner imports the same tool modules itself
    return create_sandbox_pool(settings)


def create_reaper(executor: ToolExecutor) -> Callable[[], Coroutine[Any, Any, None]] | None:
    """The background task that reaps idle sandboxes, if the executor keeps any."""
    return executor.run_reaper if isinstance(executor, SandboxPool) else None
