"""What one request carries through the pipeline, and what a stage is.

A `RequestContext` starts with what the transport read off the wire (headers, the target,
arguments) and is filled in stage by stage: the principal, the tool context, the limits, the
result or the SERF error. Identity fields are only ever written by stages, never copied from
the request body.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from starlette.datastructures import Headers

from gateway.budgets import DelegatedCall, HedgeReport, InFlight, LatencySample, TimeAsk
from gateway.cancellation import CallCancel
from gateway.delegation import NO_CHAIN, DelegationChain
from gateway.gateway_error import GatewayError
from gateway.telemetry import TRACING, current_trace
from protocol import (
    Access,
    ApprovalRecord,
    Budget,
    BudgetGrant,
    CallUsage,
    Principal,
    ResourceRequest,
    SerfError,
    ToolContext,
)
from tools import RegisteredTool
from tools.calls import CallerClient, CallEvents, Invocation

_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")

# "console": an admin's call through the console's "try this tool" form, as an agent.
_NOTHING_ASKED = TimeAsk()  # a request scope has not read (frozen: one serves all)

Transport = Literal["http", "mcp", "console", "a2a"]
Operation = Callable[["RequestContext"], Awaitable[Any]]


@dataclass
class RequestContext:
    """One request on its way through authenticate -> ... -> account."""

    # What the transport read. `headers` keys are lower-case.
    transport: Transport
    operation: str  # what the audit calls it: a tool name, "mcp:tools/list", "state:read"...
    headers: Mapping[str, str]
    tool_name: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    limits: ResourceRequest | None = None
    budget: Budget | None = None
    meta: Mapping[str, Any] | None = None  # MCP `_meta`: only the deadline is read from it
    # What the calling client may be asked (`tools.calls.CallerClient`), set where the MCP
    # request enters: the client features a 2026-07-28 request declared (its `_meta`'s
    # clientCapabilities), and a retry's answers for the tool's server once its relayed state
    # is opened (`gateway.mcp_state.input_rounds`); None: nothing is known of the client.
    client: CallerClient | None = None
    namespace: str | None = None
    access: Access | None = None
    a2a_agent: str | None = None  # the A2A agent the request goes to (its served name)
    # A request that hands the agent work (SendMessage): ATBA grants it a share of the
    # deadline, as it would a tool call, and that share is the deadline the agent gets.
    delegated: DelegatedCall | None = None
    # How long the agent took to answer the delegation (censored: cut at its time), set by
    # the A2A action when the answer was waited for; the account stage adds it to the window.
    delegation_sample: LatencySample | None = None
    # The delegation the request is part of (its verified `X-Conclave-Chain`: the A2A agents it
    # went through, who delegated to each), read by authorize; and the signed header that goes
    # on with it to `a2a_agent`, written there (gateway.delegation).
    chain: DelegationChain = NO_CHAIN
    a2a_onward: str = ""
    action: Operation | None = None  # a non-tool operation dispatch performs (state, listing)
    input_error: BaseException | None = None  # the body could not be read or parsed
    # A tool call's cancel switch (the pipeline runs its stages in the switch's scope), and
    # an MCP call's JSON-RPC id, by which `notifications/cancelled` names it.
    cancel: CallCancel | None = None
    request_id: str | int | None = None
    # Who made the call on the principal's behalf, when it was not the principal itself: the
    # console sets "admin (console)" for its "try this tool" form. The audit records it.
    acted_by: str = ""
    # The caller asked for a failing tool's traceback and holds the admin key (the tools'
    # code is the operator's): set by the transport; dispatch drops the traceback otherwise.
    show_traceback: bool = False
    # Where the call's progress and log messages go while it runs (`/mcp` streaming them);
    # None: nobody listens, and executors report nothing.
    events: CallEvents | None = None
    # Awaited by dispatch once every check has passed, just before the tool runs: an MCP
    # task is created there (`gateway.mcp_tasks`), so a refused call is answered as it always
    # is, and only an admitted one becomes a task.
    on_admitted: Operation | None = None
    # Awaited while an `approve` policy rule holds the call (`gateway.approvals`): with the
    # approval once the call waits, with None once it is released. An MCP task sets it (and
    # is created before its call waits), so its client sees it `input_required` meanwhile.
    on_held: Callable[[ApprovalRecord | None], Awaitable[None]] | None = None

    # Filled in by the stages.
    principal: Principal | None = None
    oauth: bool = False  # the token came from the OAuth authorization server (can step up)
    tool_context: ToolContext | None = None
    time_ask: TimeAsk = _NOTHING_ASKED  # the caller's deadline, plan, reserve: read by scope
    trace_id: str = ""
    traceparent: str = ""  # what our span hands on to the tool: the caller's trace, our span id
    tool: RegisteredTool | None = None
    # The tool (or A2A agent) named is not one the caller may call (not served, or outside
    # its scopes): found by authorize, raised by budget once admission knows the token is
    # current, so a revoked token learns nothing about the tools served.
    tool_refusal: GatewayError | None = None
    in_flight: InFlight | None = None  # the call's place among its tenant's, to give back
    granted_ms: int | None = None
    kill_margin_ms: int | None = None  # moves the sandbox's deadline before the run's
    hedge: HedgeReport | None = None  # ATBA's wait-or-hedge decision, and what the hedge did
    grant: BudgetGrant | None = None  # what the caller is told: the grant, the time left
    invocation: Invocation | None = None  # what dispatch handed the executor (its limits)
    answered_ms: float | None = None  # unix ms when the executor answered
    executed: bool = False
    result: Any = None
    usage: CallUsage | None = None
    error: SerfError | None = None
    failed_stage: str | None = None
    started: float = field(default_factory=time.perf_counter)
    stage_seconds: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if type(self.headers) is Headers:  # read once into a dict: the stages ask ~16 times
            self.headers = header_dict(self.headers.raw)
        # Known before any stage runs, so even a refused request's envelope carries it.
        self.trace_id, self.traceparent = trace_of(self.headers.get("traceparent"))
        if TRACING.on and (current := current_trace()) is not None:
            self.trace_id, self.traceparent = current  # the request's span names the trace

    @property
    def ok(self) -> bool:
        return self.error is None

    def require_principal(self) -> Principal:
        if self.principal is None:  # a stage ran before authenticate: a wiring bug
            raise RuntimeError(
                "the pipeline ran a stage that needs a principal before authenticate"
            )
        return self.principal


def header_dict(raw: Sequence[tuple[bytes, bytes]]) -> dict[str, str]:
    """Raw ASGI headers (names lower-case) as a dict, each name's first value (as Starlette's
    `Headers.get` answers): a lookup costs ~0.07 us, against ~1 us scanning Starlette's list."""
    return {name.decode("latin-1"): value.decode("latin-1") for name, value in reversed(raw)}


def trace_of(traceparent: str | None) -> tuple[str, str]:
    """(trace id, the traceparent our span hands on): the caller's W3C trace, or a new one.

    New ids come from `random`, as OpenTelemetry's SDK makes them: an id names a request, it
    grants nothing, and `secrets` (two `getrandom` calls a request) cost ~2% of an echo's CPU.
    """
    match = _TRACEPARENT.match(traceparent or "")
    valid = match is not None and match.group(1) != "0" * 32
    trace_id = match.group(1) if match and valid else _new_id(128)
    flags = match.group(3) if match and valid else "01"
    return trace_id, f"00-{trace_id}-{_new_id(64)}-{flags}"


def _new_id(bits: int) -> str:
    """A random id of `bits` bits as lower-case hex, never all zeros (W3C: invalid)."""
    return f"{random.getrandbits(bits) or 1:0{bits // 4}x}"


class Stage(Protocol):
    """One step of the pipeline. Raises `GatewayError` to refuse; returns to pass on."""

    name: str

    async def __call__(self, ctx: RequestContext) -> None: ...
