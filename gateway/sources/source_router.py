"""`SourceRouter`: the dispatch stage's executor, which sends each call where its tool runs.

Where a tool runs is read from the one table, `tools.sources.placement`: an `mcp_http` tool
goes to its upstream, an `mcp_stdio` tool to its server in the caller's sandbox (through the
sandbox executor, `local`), every other tool (the gateway's own, `python` sources') to
`local` itself: the sandbox pool, or the in-process executor on the `inprocess` backend.
"""

from __future__ import annotations

from gateway.sources.mcp_http import UpstreamSet
from gateway.sources.mcp_stdio import StdioSources
from sandbox import Invocation, Outcome, ToolExecutor
from tools.sources import RunsIn, runs_in


class SourceRouter:
    """The executor that routes each call to the executor its tool's kind runs in."""

    def __init__(self, local: ToolExecutor, stdio: StdioSources, upstreams: UpstreamSet) -> None:
        self.local = local
        self.stdio = stdio
        self.upstreams = upstreams
        stdio.executor = local  # the stdio servers' resources and prompts run there too

    @property
    def name(self) -> str:
        return self.local.name

    async def execute(self, invocation: Invocation) -> Outcome:
        # An upstream's tool is known by its registered entrypoint (the registry is the
        # upstream set's, which adds and withdraws them as the upstream's list changes).
        upstream = self.upstreams.owner_of(self.upstreams.registry.get(invocation.tool))
        if upstream is not None:
            return await upstream.call(invocation)
        if runs_in(invocation.entrypoint) is RunsIn.STDIO_SERVER:
            return await self.stdio.call_tool(self.local, invocation)
        return await self.local.execute(invocation)

    async def aclose(self) -> None:
        await self.local.aclose()
