"""`CallEvents`: where one call's events go, and the bound on what a call may send there.

An `Invocation` carries one (or None: nobody listens, as for a REST call, and executors
report nothing). Every executor hands what the call reported to it: typed events from
in-process tools (`emit`), what a sandbox's runner sent (`emit_untrusted`), and an MCP
server's `notifications/progress` and `notifications/message` (`emit_notification`, the one
place they become events, for stdio servers and HTTP upstreams alike): validated here, once,
and dropped when they are not events. Tool code and
servers are hostile, so a call may send at most `MAX_EVENTS` events of at most
`MAX_EVENT_BYTES` each; the rest are dropped and counted (`dropped`). Events are shown to
the caller only: nothing in them is used for accounting.

`deliver` must not block: the runner's channel is read in the call's own task, so a slow
client must cost dropped events, never a late kill.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from pydantic import ValidationError

from protocol import CALL_EVENT, LogEvent, ProgressEvent
from sandbox.runner_wire import EVENT_LIMIT, MAX_EVENTS, NOTIFICATIONS

MAX_EVENT_BYTES = EVENT_LIMIT
PROGRESS, MESSAGE = NOTIFICATIONS

Deliver = Callable[[ProgressEvent | LogEvent], None]


class CallEvents:
    def __init__(self, deliver: Deliver, *, max_events: int = MAX_EVENTS) -> None:
        self._deliver = deliver
        self.max_events = max_events
        self.accepted = 0
        self.dropped = 0

    def emit(self, event: ProgressEvent | LogEvent) -> None:
        """Pass `event` on, unless the call has sent its share already."""
        if self.accepted >= self.max_events:
            self.dropped += 1
            return
        self.accepted += 1
        self._deliver(event)

    def emit_untrusted(self, raw: object, size: int | None = None) -> None:
        """Pass on what a runner or a server sent, if it is an event of at most
        `MAX_EVENT_BYTES` (`size`: its length on the wire, when known)."""
        if self.accepted >= self.max_events:
            self.dropped += 1
            return
        if size is None:
            try:
                size = len(json.dumps(raw, separators=(",", ":")))
            except (TypeError, ValueError):
                size = MAX_EVENT_BYTES + 1
        if size > MAX_EVENT_BYTES:
            self.dropped += 1
            return
        try:
            event = CALL_EVENT.validate_python(raw)
        except ValidationError:
            self.dropped += 1
            return
        self.emit(event)

    def emit_notification(self, message: object) -> None:
        """Pass on an MCP server's `notifications/progress` or `notifications/message` (a
        JSON-RPC message as it came) as the call's event; anything else is dropped."""
        params = message.get("params") if isinstance(message, dict) else None
        if not isinstance(params, dict):
            self.dropped += 1
            return
        method = message.get("method") if isinstance(message, dict) else None
        if method == PROGRESS:
            fields = ("progress", "total", "message")
            self.emit_untrusted({"kind": "progress", **{k: params.get(k) for k in fields}})
        elif method == MESSAGE:
            fields = ("level", "data", "logger")
            self.emit_untrusted({"kind": "log", **{k: params.get(k) for k in fields}})
        else:
            self.dropped += 1
