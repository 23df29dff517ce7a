"""`SourceRouter`: the dispatch stage's executor, which sends each call where its tool runs.

Where a tool runs is the invocation's `Placement` (`tools.calls`), set where the tool's kind
registered: an `mcp_http` tool goes to its upstream, an `mcp_stdio` tool to its server in the
caller's sandbox (through the sandbox executor, `local`), every other tool (the gateway's own,
`python` sources') to `local` itself: the sandbox pool, or the in-process executor on the
`inprocess` backend. No tool is looked up again here, and no entrypoint is read.
"""

from __future__ import annotations

from gateway.sources.mcp_http import UpstreamSet
from gateway.sources.mcp_stdio import StdioSources
from tools.calls import Invocation, Outcome, RunsIn, ToolExecutor


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
        placement = invocation.placement
        if placement.runs_in is RunsIn.HTTP_UPSTREAM:
            return await self.upstreams.call(placement.source, invocation)
        if placement.runs_in is RunsIn.STDIO_SERVER:
            return await self.stdio.call_tool(self.local, invocation)
        return await self.local.execute(invocation)

    async def aclose(self) -> None:
        await self.local.aclose()
