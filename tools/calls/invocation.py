"""What goes into a tool call across the seam: an `Invocation`, run under its `CallLimits`.

The gateway's dispatch stage hands an `Invocation` (the arguments as sent, the caller's
context, the limits the call may use, where the tool runs) to a `ToolExecutor` and gets an
`Outcome` back (docs/architecture.md, "Where a tool runs"). A call is a stream: before its
outcome, what the tool reports (progress, log messages, requests to the client) goes to the
invocation's `events` (`CallEvents`, bounded there), when someone listens; a cancel goes the
other way as the cancellation of the awaiting task.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from protocol import ToolContext
from tools.calls.call_event_sink import CallEvents
from tools.calls.caller_client import CallerClient
from tools.calls.placement import IN_SANDBOX, Placement
from tools.calls.server_message import ServerMessage
from tools.calls.subscription_hold import SubscriptionHold


@dataclass(frozen=True)
class CallLimits:
    """The limits one call runs under, after the caller's request was fitted to the intent."""

    memory_mb: int
    cpu_seconds: float
    timeout_ms: int
    max_output_bytes: int


@dataclass(frozen=True)
class Invocation:
    tool: str
    entrypoint: str  # "module:function" for the runner to import
    arguments: dict[str, Any]  # as the caller sent them: the executor validates them, once
    context: ToolContext
    limits: CallLimits
    network: tuple[str, ...] = ()  # the tool's egress allow-list ("host:port"); empty: none
    events: CallEvents | None = None  # where the call's progress and logs go; None: nobody
    # False: refused at once (SANDBOX_UNAVAILABLE) when the caller's share of sandboxes is in
    # use, never queued: a hedge takes a free slot of the caller's own or does not start.
    may_queue: bool = True
    # What the calling client may be asked (the features it declared, a retry's answers),
    # filled where the request entered; None: nothing is known of it.
    client: CallerClient | None = None
    # A call that subscribes an MCP server in the sandbox: the pool keeps that sandbox for
    # the hold's time after it, and its servers' notices go to the hold's receiver.
    hold: SubscriptionHold | None = None
    # Where the tool runs (the registered tool's, or an MCP source's server for a message
    # relayed to it): every executor routes on it, none on the entrypoint's text.
    placement: Placement = IN_SANDBOX
    # The request the runner relays to an MCP server in the sandbox (`ServerMessage`), for a
    # tool of an `mcp_stdio` source or a message to its server; None: the runner runs the
    # tool itself.
    relay: ServerMessage | None = None
