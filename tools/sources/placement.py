"""Where each kind of tool runs: the one table every executor that routes a call reads.

A registered tool's entrypoint says its kind. `module:function` (the gateway's own tools and
`python` sources' tools) is imported and run by the runner in the caller's sandbox, or by the
in-process executor when the backend is `inprocess`; `mcp_stdio:<source>/<tool>` is relayed
by that runner to the MCP server it runs in the same sandbox; `mcp_http:<source>/<tool>` is
sent to the remote upstream by the gateway, no sandbox involved. The prefixes are written by
the discovery of each kind (`gateway.sources.mcp_stdio`, `gateway.sources.mcp_http`) and read
here only: this module lives in `tools` so that `sandbox` and `gateway` can both import it.
"""

from __future__ import annotations

from enum import Enum


class RunsIn(Enum):
    """Which executor runs a tool."""

    SANDBOX = "sandbox"  # the runner imports and calls it (in-process executor: the gateway)
    STDIO_SERVER = "stdio_server"  # the runner relays it to an MCP server in the sandbox
    HTTP_UPSTREAM = "http_upstream"  # the gateway sends it to a remote MCP server


# Entrypoint prefix of each source kind whose tools do not run as imported Python.
MCP_STDIO_ENTRYPOINT = "mcp_stdio:"
MCP_HTTP_ENTRYPOINT = "mcp_http:"

_BY_PREFIX: dict[str, RunsIn] = {
    MCP_STDIO_ENTRYPOINT: RunsIn.STDIO_SERVER,
    MCP_HTTP_ENTRYPOINT: RunsIn.HTTP_UPSTREAM,
}


def runs_in(entrypoint: str) -> RunsIn:
    """Where the tool whose entrypoint this is runs."""
    prefix, colon, _ = entrypoint.partition(":")
    return _BY_PREFIX.get(prefix + colon, RunsIn.SANDBOX) if colon else RunsIn.SANDBOX


def source_of(entrypoint: str) -> str:
    """The source a `mcp_stdio:`/`mcp_http:` entrypoint names (`<source>/<tool>` or `<source>`)."""
    return entrypoint.partition(":")[2].split("/", 1)[0]
