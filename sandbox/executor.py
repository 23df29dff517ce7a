"""The seam between the gateway's dispatch stage and whatever runs tools.

The gateway hands an `Invocation` (the arguments as sent, the caller's context, the limits the
call may use) to a `ToolExecutor` and gets an `Outcome` back: a result or a SERF error, with
the call's usage either way. Executors never raise for a tool's own failure.

A call is a stream: before its outcome, what the tool reports (progress, log messages) goes
to the invocation's `events` (`CallEvents`, bounded there), when someone listens; a cancel
goes the other way as the cancellation of the awaiting task.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from protocol import CallUsage, ErrorCode, InputAnswer, InputRound, SerfError, ToolContext
from sandbox.backend import StartStage
from sandbox.call_event_sink import CallEvents
from sandbox.idle_watch import SubscriptionHold
from tools import ToolResult
from tools.calls import IN_SANDBOX, Placement


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
    # The client features (MCP `clientCapabilities`) the request declared, on the 2026-07-28
    # wire; None on the handshake era, whose capabilities the stateless gateway never keeps.
    client_capabilities: Mapping[str, Any] | None = None
    # A 2026-07-28 retry's answers to what the tool's server asked in its last round (its
    # `InputRequiredResult`), with the server's own state: for the server, and it alone.
    answer: InputAnswer | None = None
    # A call that subscribes an MCP server in the sandbox: the pool keeps that sandbox for
    # the hold's time after it, and its servers' notices go to the hold's receiver.
    hold: SubscriptionHold | None = None
    # Where the tool runs (the registered tool's, or an MCP source's server for a message
    # relayed to it): every executor routes on it, none on the entrypoint's text.
    placement: Placement = IN_SANDBOX


# Failures decided before the tool did any work: they say nothing about its latency or health.
NOT_RUN = frozenset(
    {
        ErrorCode.INVALID_ARGUMENTS,
        ErrorCode.TOOL_NOT_FOUND,
        ErrorCode.SANDBOX_UNAVAILABLE,
        ErrorCode.CLIENT_CAPABILITY_MISSING,  # stopped for the caller, not the tool's fault
    }
)


@dataclass(frozen=True)
class Outcome:
    usage: CallUsage
    result: Any = None  # the JSON value (a tool's: what REST shows as its `result`)
    # A tool's result as MCP content (its blocks, structured content, `_meta`), from every
    # executor that runs tools; None for a relayed MCP message or a plain function's value.
    output: ToolResult | None = None
    error: SerfError | None = None
    waited_ms: float | None = None  # the wait for a sandbox (queue, start): pooled runs only
    # The stages of the sandbox start the call waited for (none: it found one warm).
    start_stages: tuple[StartStage, ...] = ()
    # The tool's server answered the call with a round of questions for the client (MCP
    # 2026-07-28's `InputRequiredResult`): not a result, not a failure; the call is retried.
    input_required: InputRound | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class ToolExecutor(Protocol):
    """Runs tool calls; one implementation per way of running them (sandbox pool, test)."""

    @property
    def name(self) -> str: ...

    async def execute(self, invocation: Invocation) -> Outcome: ...

    async def aclose(self) -> None: ...
