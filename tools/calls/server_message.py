"""`ServerMessage`: what the runner relays to an MCP server it keeps in the caller's sandbox.

An `mcp_stdio` source's server runs by stdio inside the calling identity's sandbox. A call of
one of its tools, and a read, prompt or subscription at `/mcp`, is one `Invocation` whose
`relay` names the server (`StdioServerSpec`: how the runner starts it) and the one JSON-RPC
request it gets; the invocation's arguments stay what the caller sent. The pool runs it as
any call (one sandbox, the same limits, events and cancel), and its sandbox sends the runner
a relay request of its own (`sandbox.runner.runner_wire.RelayRequest`), not a tool call.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class StdioServerSpec:
    """An `mcp_stdio` source's server as the runner starts it: the prepared package it
    imports for its paths, its command and the environment the source declares."""

    source: str
    package: str
    command: tuple[str, ...]
    env: Mapping[str, str]


@dataclass(frozen=True)
class ServerMessage:
    """One JSON-RPC request (`method`, `params`; the runner gives it an id) for `server`.

    `capabilities`: the client features the server may ask the caller for (sampling,
    elicitation, roots); the runner starts the server again if it was told others. None:
    nobody listens to the call, so the server is left as it is and asked nothing."""

    server: StdioServerSpec
    method: str
    params: Mapping[str, Any]
    capabilities: Mapping[str, Any] | None = None
