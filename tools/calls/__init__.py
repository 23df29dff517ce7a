"""The call contract every executor implements, below the sandbox and the gateway: standard
library only, no MCP revision in it. So far: where a tool runs (`Placement`), decided where its
kind registers and carried typed to every executor."""

from tools.calls.placement import IN_SANDBOX, Placement, RunsIn

__all__ = ["IN_SANDBOX", "Placement", "RunsIn"]
