"""`ToolExecutor`: what every place a tool runs implements (the sandbox pool, the in-process
executor, an `mcp_http` upstream, the router in front of them)."""

from __future__ import annotations

from typing import Protocol

from tools.calls.invocation import Invocation
from tools.calls.tool_outcome import Outcome


class ToolExecutor(Protocol):
    """Runs tool calls; one implementation per way of running them (sandbox pool, test)."""

    @property
    def name(self) -> str: ...

    async def execute(self, invocation: Invocation) -> Outcome: ...

    async def aclose(self) -> None: ...
