"""One running sandbox: a launched backend process, the runner connected to it, and its
workspace.

| module | holds |
|---|---|
| `running_sandbox` | `Sandbox`: its start, one call's frames, cancel, the idle hold, teardown |
| `channel` | the runner's socket: length-prefixed JSON frames, bounded |
| `runner_reply` | what the host makes of a runner's reply: checked, clamped, an `Outcome` |
| `server_requests` | an MCP server's requests to the calling client during a call |
| `idle_watch` | an idle sandbox's MCP servers heard between calls |
| `workspace` | the per-sandbox workspace on the host, and its quota |
"""

from sandbox.instance.running_sandbox import (
    CANCEL_ANSWER_S,
    EgressGate,
    Sandbox,
    StaleSandboxError,
)
from sandbox.instance.workspace import DEFAULT_ROOT as DEFAULT_WORKSPACE_ROOT
from sandbox.instance.workspace import (
    abandoned_workspaces,
    create_workspace,
    remove_workspace,
)

__all__ = [
    "CANCEL_ANSWER_S",
    "DEFAULT_WORKSPACE_ROOT",
    "EgressGate",
    "Sandbox",
    "StaleSandboxError",
    "abandoned_workspaces",
    "create_workspace",
    "remove_workspace",
]
