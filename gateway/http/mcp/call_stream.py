"""A `tools/call` at `/mcp` answered while it runs: an event stream on the POST.

When the client accepts `text/event-stream`, the call's events (`tools.calls.CallEvents`: its
tool's progress and log messages, its MCP server's notifications) are listened to. The
answer is decided by the call itself: at its first event the caller takes, the answer
becomes an SSE stream (`notifications/progress` with the caller's `_meta.progressToken`,
`notifications/message`, then the JSON-RPC response as the last event); a call that sends
none (or a client that accepts only JSON) is answered plain JSON, as before. A 2026-07-28
client that accepts only JSON and declared client features is answered here too, without a
stream (`streams=False`): its events are dropped, its servers' requests asked in rounds. A progress
event is taken only when the caller sent a `progressToken`; a log message only at or above
the caller's level (`level_of`, asked once per call, at its first log message: the handshake
era's `logging/setLevel` of the identity, the 2026-07-28 wire's `_meta` level of the
request, where a request without one is sent no log message).

A `resources/read` or `prompts/get` of an MCP source is answered here as a call is (its
server may ask the client too: `gateway.mcp_state.catalog`).

A request one of the call's servers sends the client (sampling, elicitation, roots; only
those the client declared, `CallEvents.request`) makes the answer a stream too: it goes out
as a JSON-RPC request under an id the gateway issues (`ClientRequests`), and the call waits
for the client to POST its response, which may reach any replica.

The call runs in the request's own task; a forwarder task starts at its first event only, so
a call that reports nothing costs what a plain JSON answer costs. Events wait in a buffer of
`BUFFERED_EVENTS` between the call and the forwarder: a client that reads slowly loses
events, never slows the call (the runner's channel is read in the call's own task). A client
that goes away stops the call, streaming or not.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from gateway.cancellation import cancel_when_client_goes
from gateway.mcp_state import ClientRequests, InputRounds
from gateway.pipeline import Pipeline, RequestContext
from protocol import (
    LogEvent,
    LogLevel,
    Principal,
    ProgressEvent,
    log_notification,
    progress_notification,
)
from tools.calls import CallEvents

BUFFERED_EVENTS = 64
# The lowest level of log message a caller's call sends it; None: it sends none.
LevelOf = Callable[[Principal], Awaitable[LogLevel | None]]
_UNASKED = object()
# What goes to the client: a call's event, or a server's request (JSON-RPC, with our id).
Outgoing = ProgressEvent | LogEvent | dict[str, Any]
EVENT_STREAM = "text/event-stream"
_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),  # a proxy in front must pass each event on at once
]


def accepts_stream(request: Request) -> bool:
    return EVENT_STREAM in request.headers.get("accept", "")


def progress_token(ctx: RequestContext) -> str | int | None:
    token = (ctx.meta or {}).get("progressToken")
    return token if isinstance(token, str | int) and not isinstance(token, bool) else None


class CallStream(Response):
    """The answer of a tool call that may stream: runs the call when it is sent."""

    def __init__(
        self,
        pipeline: Pipeline,
        ctx: RequestContext,
        answer: Callable[[], Response],
        level_of: LevelOf,
        requests: ClientRequests,
        capabilities: Mapping[str, Any],
        rounds: InputRounds | None = None,
        *,
        streams: bool = True,
    ) -> None:
        super().__init__()
        self.pipeline = pipeline
        self.ctx = ctx
        self.answer = answer  # the call's JSON-RPC answer, once it has run
        self.level_of = level_of
        self.requests = requests
        self.capabilities = capabilities  # what the client declared of MCP's client features
        # A 2026-07-28 client's call: its server's requests go out as InputRequiredResult.
        self.rounds = rounds
        # False: the client takes only JSON; its call's events are dropped, and its server's
        # requests are asked in rounds all the same (`rounds`).
        self.streams = streams
        self.token = progress_token(ctx)
        self._level: LogLevel | object | None = _UNASKED
        self._streaming = False  # the answer is an event stream: its head was sent
        self._offer: Callable[[Outgoing], bool] = _closed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        ctx = self.ctx
        assert ctx.cancel is not None  # a tool call, or a read or a prompt of a source
        sender, events = anyio.create_memory_object_stream[Outgoing](BUFFERED_EVENTS)
        async with (
            cancel_when_client_goes(scope, receive, ctx.cancel),
            events,  # closed after the forwarder is done with it
            anyio.create_task_group() as forwarding,
        ):
            if self.streams:
                self._offer = _offer_to(
                    sender, partial(forwarding.start_soon, self._forward, events, send)
                )
            call = None if self.rounds is None else self.rounds.round_trip(ctx)
            ask = self._ask if call is None else call.ask
            ctx.events = CallEvents(self._offer, ask=ask, capabilities=self.capabilities)
            with sender:
                if call is None:
                    await self.pipeline.run(ctx)
                    answer = self.answer()
                else:  # answered at its end, or at its server's first request
                    answer = await call.first_round(self.pipeline, self.answer)
            self._offer = _closed
        if not self._streaming:
            await answer(scope, receive, send)
            return
        await send(
            {"type": "http.response.body", "body": _sse_raw(answer.body), "more_body": False}
        )

    async def _ask(self, method: str, params: dict[str, Any]) -> object:
        """Send the client a server's request on this stream; its response, from any replica
        (`CallEvents.request` bounds the wait)."""
        principal = self.ctx.require_principal()
        request_id = self.requests.issue(principal)
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        with self.requests.waiting(principal, request_id) as answers:
            if not self._offer(message):
                return {"error": {"code": -32603, "message": "the client's stream is full"}}
            return await answers.receive()

    async def _forward(self, events: MemoryObjectReceiveStream[Outgoing], send: Send) -> None:
        """Send the client each event it takes, starting the event stream at the first."""
        async for event in events:
            note = event if isinstance(event, dict) else await self._notification(event)
            if note is None:
                continue
            if not self._streaming:
                self._streaming = True
                await send({"type": "http.response.start", "status": 200, "headers": _HEADERS})
            await send({"type": "http.response.body", "body": _sse(note), "more_body": True})

    async def _notification(self, event: ProgressEvent | LogEvent) -> dict[str, Any] | None:
        """The MCP notification of `event` for this caller; None when it does not take it."""
        if isinstance(event, ProgressEvent):
            return None if self.token is None else progress_notification(event, self.token)
        if self._level is _UNASKED:
            self._level = await self.level_of(self.ctx.require_principal())
        level = self._level
        if not isinstance(level, LogLevel) or event.level.rank < level.rank:
            return None
        return log_notification(event)


def _offer_to(
    sender: MemoryObjectSendStream[Outgoing], start_forwarding: Callable[[], Any]
) -> Callable[[Outgoing], bool]:
    started = False

    def offer(event: Outgoing) -> bool:
        """Queue `event` for the client; False when it was dropped (the client reads slower
        than the call reports, or the call is over)."""
        nonlocal started
        try:
            sender.send_nowait(event)
        except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            return False
        if not started:
            started = True
            start_forwarding()
        return True

    return offer


def _closed(_: Outgoing) -> bool:
    return False


def _sse(message: dict[str, Any]) -> bytes:
    return _sse_raw(json.dumps(message, separators=(",", ":")).encode())


def _sse_raw(data: bytes | memoryview) -> bytes:
    return b"event: message\ndata: " + bytes(data) + b"\n\n"


def fixed_level(level: LogLevel | None) -> LevelOf:
    """`level` for every caller: a 2026-07-28 request's own."""

    async def level_of(_: Principal) -> LogLevel | None:
        return level

    return level_of


__all__ = [
    "BUFFERED_EVENTS",
    "CallStream",
    "LevelOf",
    "accepts_stream",
    "fixed_level",
    "progress_token",
]
