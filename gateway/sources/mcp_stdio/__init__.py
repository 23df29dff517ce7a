"""`mcp_stdio` sources: MCP servers run by stdio inside the caller's sandbox.

Prepare: `prepare` builds, on the host, the package directory a sandbox mounts (npm packages,
and pypi ones for the backends that bind host directories; Docker gets an image layer).
Discover and execute: `stdio_sources` lists each server's tools through one sandbox at
start-up, and `StdioSources.call_tool` relays a call of such a tool (`tools.calls.Placement`) to
the server in the caller's sandbox, with its resources, prompts and subscriptions.
"""

from gateway.sources.mcp_stdio.stdio_sources import StdioSources

__all__ = ["StdioSources"]
