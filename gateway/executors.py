"""Which `ToolExecutor` the gateway dispatches to: the one place that decides.

Until the sandbox pool is wired in here (by `settings.sandbox_backend`), every backend name
runs tools in-process; `/readyz` reports the executor actually in use.
"""

from __future__ import annotations

from gateway.settings import Settings
from sandbox.executor import ToolExecutor
from sandbox.inprocess import InProcessExecutor
from tools.registry import ToolRegistry


def create_executor(settings: Settings, registry: ToolRegistry) -> ToolExecutor:
    del settings  # the sandbox pool will choose by settings.sandbox_backend
    return InProcessExecutor(registry)
