"""Cancelling a tool call whose caller no longer waits for it (docs/architecture.md, "Where a
tool runs": a cancel stops the work wherever it runs within 100 ms).

`CallCancel` is a call's switch (the pipeline runs the call's stages in its scope);
`InflightCalls` finds an MCP call from any replica, by the caller's identity and request id,
for `notifications/cancelled`; `cancel_when_client_goes` pulls the switch when the HTTP
client closes its connection.
"""

from gateway.cancellation.call_cancel import CallCancel
from gateway.cancellation.client_gone import (
    CLIENT_GONE,
    CLIENT_GONE_HOOK,
    cancel_when_client_goes,
)
from gateway.cancellation.inflight_calls import (
    CALLER_CANCELLED,
    CHANNEL,
    CallKey,
    InflightCalls,
    call_key,
)

__all__ = [
    "CALLER_CANCELLED",
    "CHANNEL",
    "CLIENT_GONE",
    "CLIENT_GONE_HOOK",
    "CallCancel",
    "CallKey",
    "InflightCalls",
    "call_key",
    "cancel_when_client_goes",
]
