"""An MCP server's requests to the calling client during a call in the sandbox.

The server's requests (sampling, elicitation, roots) come from the runner as server-request
frames before the call's reply; each goes to the invocation's `events`
(`CallEvents.request`, which asks the client or refuses) and its answer back to the runner as
a server-answer frame (`answer_server`), while the call's other frames are read on: a
client's slow answer holds up nothing else. A request for a feature the caller's request did
not declare (`Invocation.client`'s `declared`, where its wire carries them) stops the call at
once, as a cancel does (the sandbox stays warm), and is answered `CLIENT_CAPABILITY_MISSING`
naming the capability (`details.requiredCapabilities`): `check_declared` raises `Undeclared`.
"""

from __future__ import annotations

import contextlib
from typing import Any

import anyio

from protocol import FEATURE_OF_METHOD, ErrorCode, SerfError
from sandbox.instance.channel import ChannelClosed, RunnerChannel
from sandbox.runner import MESSAGE_FIELD, REQUEST_FIELD, SERVER_ANSWER
from tools.calls import CallEvents, Invocation


class Undeclared(Exception):
    """The call's server asked the client for a feature the caller's request did not declare;
    `error` is what the call answers."""

    def __init__(self, error: SerfError) -> None:
        super().__init__(error.message)
        self.error = error


def check_declared(invocation: Invocation, frame: dict[str, Any]) -> None:
    """Raise `Undeclared` when the server's request (`frame`) needs a client feature the
    request declared not (on the 2026-07-28 wire; the handshake era declares nothing here)."""
    declared = None if invocation.client is None else invocation.client.declared
    message = frame.get(MESSAGE_FIELD)
    method = message.get("method") if isinstance(message, dict) else None
    needed = FEATURE_OF_METHOD.get(method) if isinstance(method, str) else None
    if declared is None or needed is None or needed in declared:
        return
    error = SerfError.of(
        ErrorCode.CLIENT_CAPABILITY_MISSING,
        f"{invocation.tool} asks the client for {needed}, which this request did not declare",
        details={"requiredCapabilities": {needed: {}}},
    )
    raise Undeclared(error)


async def answer_server(
    channel: RunnerChannel,
    call_id: int,
    frame: dict[str, Any],
    events: CallEvents | None,
    deadline: float,
) -> None:
    """Answer a server's request to the client (`frame`), by `deadline` at the latest."""
    if events is None:
        refused = "the caller takes no requests: it does not listen to the call's events"
        answer: dict[str, Any] = {"error": {"code": -32601, "message": refused}}
    else:
        answer = await events.request(frame.get(MESSAGE_FIELD), deadline)
    reply = {"type": SERVER_ANSWER, "id": call_id, REQUEST_FIELD: frame.get(REQUEST_FIELD)}
    with anyio.CancelScope(shield=True), contextlib.suppress(ChannelClosed):
        # A frame goes whole; a runner gone is found by the call's own read.
        await channel.send({**reply, **answer})
