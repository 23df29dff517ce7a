"""The call contract every executor implements (docs/architecture.md, "Where a tool runs"),
below the sandbox and the gateway: the standard library, pydantic and `protocol` only, and no
MCP revision in it.

| module | holds |
|---|---|
| `placement` | where a tool runs (`RunsIn`, `Placement`), decided where its kind registers |
| `invocation` | what goes in: `Invocation` and its `CallLimits` |
| `tool_outcome` | what comes out: `Outcome` (with the `StartStage`s a call waited for), `NOT_RUN` |
| `tool_executor` | `ToolExecutor`, what every place a tool runs implements |
| `caller_client` | `CallerClient`: what the calling client may be asked, filled at the edge |
| `call_event_sink` | `CallEvents`: the call's events and requests to the client, bounded |
| `server_message` | `ServerMessage`: what the runner relays to an MCP server in the sandbox |
| `subscription_hold` | `SubscriptionHold`: a subscribing call's sandbox kept, its notices heard |
| `time_limit` | the one place a call's effective time limit is worked out |

A cancel needs no type here: it travels as the cancellation of the task awaiting `execute`.
"""

from tools.calls.call_event_sink import (
    MAX_EVENT_BYTES,
    MAX_EVENTS,
    MAX_PENDING_REQUESTS,
    REQUEST_LIMIT,
    REQUEST_TIMEOUT,
    Ask,
    CallEvents,
    Deliver,
    answer_deadline,
)
from tools.calls.caller_client import NO_CLIENT, CallerClient
from tools.calls.invocation import CallLimits, Invocation
from tools.calls.placement import IN_SANDBOX, Placement, RunsIn
from tools.calls.server_message import ServerMessage, StdioServerSpec
from tools.calls.subscription_hold import Heard, SubscriptionHold
from tools.calls.time_limit import (
    RUNNER_GRACE_MS,
    TimeLimit,
    fit_timeout,
    gateway_wait_s,
    kill_margin_ms,
    sandbox_deadline_ms,
)
from tools.calls.tool_executor import ToolExecutor
from tools.calls.tool_outcome import NOT_RUN, Outcome, StartStage

__all__ = [
    "IN_SANDBOX",
    "MAX_EVENTS",
    "MAX_EVENT_BYTES",
    "MAX_PENDING_REQUESTS",
    "NOT_RUN",
    "NO_CLIENT",
    "REQUEST_LIMIT",
    "REQUEST_TIMEOUT",
    "RUNNER_GRACE_MS",
    "Ask",
    "CallEvents",
    "CallLimits",
    "CallerClient",
    "Deliver",
    "Heard",
    "Invocation",
    "Outcome",
    "Placement",
    "RunsIn",
    "ServerMessage",
    "StartStage",
    "StdioServerSpec",
    "SubscriptionHold",
    "TimeLimit",
    "ToolExecutor",
    "answer_deadline",
    "fit_timeout",
    "gateway_wait_s",
    "kill_margin_ms",
    "sandbox_deadline_ms",
]
