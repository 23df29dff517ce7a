"""Where each kind of tool runs, decided once where the kind registers and carried typed.

A registered tool's `Placement` says its kind. The gateway's own tools and `python` sources'
tools run in the caller's sandbox (the runner imports their `module:function` entrypoint; the
in-process executor runs them when the backend is `inprocess`): `IN_SANDBOX`, the default. An
`mcp_stdio` source's tool is relayed by that runner to the MCP server it runs in the same
sandbox; an `mcp_http` source's tool is sent to the remote upstream by the gateway, no
sandbox involved. Each kind's discovery (`gateway.sources.mcp_stdio`,
`gateway.sources.mcp_http`) builds the placement with the source's name and the name its
server knows the tool by; the call's `Invocation` carries it to every executor, so none
reads a tool's kind back out of a string. It lives in `tools.calls`, below the sandbox and the
gateway, which both import it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class RunsIn(Enum):
    """Which executor runs a tool."""

    SANDBOX = "sandbox"  # the runner imports and calls it (in-process executor: the gateway)
    STDIO_SERVER = "stdio_server"  # the runner relays it to an MCP server in the sandbox
    HTTP_UPSTREAM = "http_upstream"  # the gateway sends it to a remote MCP server


# Entrypoint prefix of each source kind whose tools do not run as imported Python: what the
# registry and the console show of such a tool (its identity), never read back for its kind.
MCP_STDIO_ENTRYPOINT = "mcp_stdio:"
MCP_HTTP_ENTRYPOINT = "mcp_http:"
_PREFIX = {RunsIn.STDIO_SERVER: MCP_STDIO_ENTRYPOINT, RunsIn.HTTP_UPSTREAM: MCP_HTTP_ENTRYPOINT}


@dataclass(frozen=True)
class Placement:
    """Where a tool runs: its executor, and for an MCP source's tool, the source and the name
    that source's server knows it by ("" for a message to the server itself)."""

    runs_in: RunsIn = RunsIn.SANDBOX
    source: str = ""
    name: str = ""

    @classmethod
    def stdio(cls, source: str, name: str = "") -> Placement:
        return cls(RunsIn.STDIO_SERVER, source, name)

    @classmethod
    def http(cls, source: str, name: str) -> Placement:
        return cls(RunsIn.HTTP_UPSTREAM, source, name)

    @property
    def entrypoint(self) -> str:
        """`mcp_stdio:<source>/<tool>` (or `mcp_stdio:<source>`), `mcp_http:<source>/<tool>`."""
        own = f"{self.source}/{self.name}" if self.name else self.source
        return f"{_PREFIX[self.runs_in]}{own}"


IN_SANDBOX = Placement()
