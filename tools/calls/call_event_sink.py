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

Requests to the client: a server may ask the calling client something during the call
(sampling, elicitation, roots: `request`). It is passed on (`ask`, given by the transport that
can reach the client: `/mcp` streaming the call) only when the client declared that feature
(`capabilities`, `protocol.client_capabilities`); else, or past `MAX_PENDING_REQUESTS`
waiting at once, `REQUEST_LIMIT` bytes or the call's share of events, the server gets a
JSON-RPC error at once. An answer the client does not give by `answer_deadline` (most of the
call's time limit, so the server has the rest to finish) is an error too: a server never
waits on a client that does not answer. `ping` is answered here.

`deliver` must not block: the runner's channel is read in the call's own task, so a slow
client must cost dropped events, never a late kill.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from pydantic import ValidationError

from protocol import CALL_EVENT, FEATURE_OF_METHOD, LogEvent, ProgressEvent, jsonrpc

# A call's bounds. The sandbox's runner, standard library only and mounted alone, spells the
# same values on its wire (`sandbox.runner`) and enforces them inside the sandbox first; a test
# holds the two equal.
MAX_EVENT_BYTES = 16 * 1024  # one event's JSON
MAX_EVENTS = 1000  # a call's events and requests to the client; more are dropped
MAX_PENDING_REQUESTS = 4  # a call's requests to the client waiting for their answer at once
REQUEST_LIMIT = 256 * 1024  # one request's JSON (a sampling request carries messages)
PROGRESS, MESSAGE = NOTIFICATIONS = ("notifications/progress", "notifications/message")

ANSWER_SHARE = 0.9  # of a call's time limit a server may wait for the client's answer
REQUEST_TIMEOUT = -32001  # the JSON-RPC code MCP's SDKs use for a request that timed out

Deliver = Callable[[ProgressEvent | LogEvent], object]  # what it returns is not read
# Send the client a request (method, params) and return its response message, as it came.
Ask = Callable[[str, dict[str, Any]], Awaitable[object]]


def answer_deadline(started: float, timeout_ms: int) -> float:
    """When a server's request to the client of a call that `started` (the event loop's clock,
    `anyio.current_time()`) with a
    limit of `timeout_ms` is answered with an error if the client has not answered."""
    return started + timeout_ms / 1000 * ANSWER_SHARE


class CallEvents:
    def __init__(
        self,
        deliver: Deliver,
        *,
        max_events: int = MAX_EVENTS,
        ask: Ask | None = None,
        capabilities: Mapping[str, Any] | None = None,
    ) -> None:
        self._deliver = deliver
        self.max_events = max_events
        self.accepted = 0
        self.dropped = 0
        self._ask = ask
        # What the calling client declared of MCP's client features (what its servers may
        # ask); none when nobody can be asked.
        self.capabilities: Mapping[str, Any] = (capabilities or {}) if ask is not None else {}
        self.pending = 0  # requests to the client waiting for its answer

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

    async def request(self, message: object, deadline: float) -> dict[str, Any]:
        """The answer to a server's request `message` (a JSON-RPC request, as it came): the
        response's `result` or `error` field, from the calling client or refused here, by
        `deadline` (the event loop's clock) at the latest. Never raises but for cancellation."""
        method = message.get("method") if isinstance(message, dict) else None
        params = message.get("params", {}) if isinstance(message, dict) else None
        if method == "ping":
            return {"result": {}}
        feature = FEATURE_OF_METHOD.get(method) if isinstance(method, str) else None
        if (
            not isinstance(method, str)
            or feature is None
            or feature not in self.capabilities
            or not isinstance(params, dict)
        ):
            shown = method[:64] if isinstance(method, str) else "(no method)"
            return _error(jsonrpc.METHOD_NOT_FOUND, f"the calling client does not take {shown}")
        if _size(message) > REQUEST_LIMIT:
            self.dropped += 1
            return _error(
                jsonrpc.INVALID_PARAMS, f"a request to the client is at most {REQUEST_LIMIT} bytes"
            )
        if self.accepted >= self.max_events or self.pending >= MAX_PENDING_REQUESTS:
            self.dropped += 1
            return _error(
                jsonrpc.INVALID_REQUEST,
                f"at most {MAX_PENDING_REQUESTS} requests to the client wait at once, and a"
                f" call sends at most {self.max_events} events and requests",
            )
        assert self._ask is not None  # capabilities are empty without it
        self.accepted += 1
        self.pending += 1
        limit = asyncio.timeout_at(deadline)
        try:
            async with limit:
                return _answer_of(await self._ask(method, params))
        except TimeoutError:
            if not limit.expired():
                raise  # the transport's own, not the client's silence
        finally:
            self.pending -= 1
        return _error(REQUEST_TIMEOUT, "the client did not answer within the call's time limit")


def _size(message: object) -> int:
    try:
        return len(json.dumps(message, separators=(",", ":")))
    except (TypeError, ValueError):
        return REQUEST_LIMIT + 1


def _error(code: int, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def _answer_of(response: object) -> dict[str, Any]:
    """The `result` or `error` of the client's response, in JSON-RPC's shape; an error when it
    has neither in that shape."""
    if isinstance(response, dict):
        result, error = response.get("result"), response.get("error")
        if isinstance(result, dict) and "error" not in response:
            return {"result": result}
        if isinstance(error, dict) and isinstance(error.get("code"), int):
            answer = {"code": error["code"], "message": str(error.get("message", ""))[:500]}
            if "data" in error:
                answer["data"] = error["data"]
            return {"error": answer}
    return _error(jsonrpc.INTERNAL_ERROR, "the client's response was not a JSON-RPC response")
