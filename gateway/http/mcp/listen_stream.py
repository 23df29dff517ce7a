"""`GET /mcp`: the server-to-client event stream of the handshake era (streamable HTTP's
standalone SSE stream), one per authenticated caller.

Opening it passes the pipeline like any message (authenticated, rate limited, audited as
`mcp:listen`); then the caller's `CallerStreams` stream is written out as SSE `message`
events, with a comment every `KEEPALIVE_S` so proxies keep the connection. The stream ends
when the caller's token expires (the client opens a new one with its new token), when its
agent is revoked (checked at each keep-alive, as admission checks it: the token's generation
against the agent's; each keep-alive also keeps the caller's resource subscriptions alive,
`subscriptions.TTL_S`), or when the client goes. A client that does not accept
`text/event-stream` is refused (400).

`initialize` answers carry an `Mcp-Session-Id` (`new_session_id`): the transport's clients
open this stream only within a session. The gateway keeps nothing per session (any replica
serves any message), so the id carries what the client declared at `initialize` of MCP's
client features (`protocol.capability_flags`, after a dot): its calls' servers may ask it
those (`session_capabilities`), and nothing else. It is the client's own claim, as it was at
`initialize`: a client that changes it changes only what it may be asked; an id without them
(or one the gateway did not issue) declares none.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream
from fastapi import Request, Response
from fastapi.responses import StreamingResponse
from redis.asyncio import Redis

from gateway.gateway_error import GatewayError
from gateway.http.gateway_parts import gateway_parts
from gateway.http.responses import challenge, serf_response
from gateway.identity import generation_key
from gateway.mcp_state import CallerStreams, ResourceSubscriptions
from gateway.pipeline import Pipeline, RequestContext
from protocol import ErrorCode, Principal, capabilities_of_flags, capability_flags

OPERATION = "mcp:listen"
KEEPALIVE_S = 15.0
SESSION_HEADER = "Mcp-Session-Id"


def new_session_id(capabilities: object = None) -> str:
    """A session id carrying the client features `capabilities` declares."""
    return f"{secrets.token_hex(16)}.{capability_flags(capabilities):x}"


def session_capabilities(session_id: str | None) -> dict[str, Any]:
    """What the client of `session_id` declared of MCP's client features."""
    _, dot, flags = (session_id or "").rpartition(".")
    if not dot or not 0 < len(flags) <= 4:
        return {}
    try:
        return capabilities_of_flags(int(flags, 16))
    except ValueError:
        return {}


async def listen(request: Request) -> Response:
    """The caller's event stream, once the pipeline admitted the caller."""
    ctx = RequestContext("mcp", OPERATION, request.headers)
    if "text/event-stream" not in request.headers.get("accept", ""):
        ctx.input_error = GatewayError.of(
            ErrorCode.INVALID_REQUEST,
            "GET /mcp opens the server's event stream: send Accept: text/event-stream"
            " (requests go by POST)",
        )

    async def admitted(_: RequestContext) -> dict[str, Any]:
        return {}

    ctx.action = admitted
    pipeline: Pipeline = gateway_parts(request.app).pipeline
    await pipeline.run(ctx)
    if ctx.error is not None:
        return serf_response(ctx.error, challenge(ctx.error))
    streams: CallerStreams = gateway_parts(request.app).caller_streams
    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    subscriptions = gateway_parts(request.app).mcp_catalog.subscriptions
    events = _events(streams, subscriptions, ctx.require_principal())
    return StreamingResponse(events, media_type="text/event-stream", headers=headers)


async def _events(
    streams: CallerStreams, subscriptions: ResourceSubscriptions, principal: Principal
) -> AsyncIterator[bytes]:
    async with streams.opened(principal) as messages:
        yield b": open\n\n"  # the answer's head goes out now: the client knows it listens
        frames = kept_alive(messages, streams, subscriptions, principal, sse_message)
        async with aclosing(frames):
            async for frame in frames:
                yield frame


async def kept_alive(
    messages: MemoryObjectReceiveStream[dict[str, Any]],
    streams: CallerStreams,
    subscriptions: ResourceSubscriptions,
    principal: Principal,
    frame: Callable[[dict[str, Any]], bytes],
) -> AsyncGenerator[bytes, None]:
    """A listening stream's frames: each message as `frame` writes it, and a keep-alive
    comment every `KEEPALIVE_S` (`still_listening`), until the token expires, the caller is
    revoked, or a newer stream of the identity takes its place (or the replica shuts down)."""
    with anyio.move_on_after(max(0.0, principal.expires_at - time.time())):
        while True:
            message: dict[str, Any] | None = None
            with anyio.move_on_after(KEEPALIVE_S):
                try:
                    message = await messages.receive()
                except anyio.EndOfStream:
                    return  # a newer stream of the identity took its place, or shutdown
            if message is None:
                if not await still_listening(streams.redis, subscriptions, principal):
                    return
                yield b": keep-alive\n\n"
                continue
            yield frame(message)


def sse_message(message: dict[str, Any]) -> bytes:
    """`message` as an SSE `message` event."""
    data = json.dumps(message, separators=(",", ":"))
    return f"event: message\ndata: {data}\n\n".encode()


async def still_listening(
    redis: Redis, subscriptions: ResourceSubscriptions, principal: Principal
) -> bool:
    """At a keep-alive: False when the principal's token was revoked; else its resource
    subscriptions are kept for another `subscriptions.TTL_S` (it still listens)."""
    if await revoked(redis, principal):
        return False
    await subscriptions.keep_alive(principal)
    return True


async def revoked(redis: Redis, principal: Principal) -> bool:
    """Whether the principal's token no longer admits (admission.lua's rule: its generation
    is not its agent's current one, absent counting as 0)."""
    current = await redis.get(generation_key(principal.tenant, principal.agent))
    return int(current or 0) != principal.generation


__all__ = [
    "KEEPALIVE_S",
    "OPERATION",
    "SESSION_HEADER",
    "kept_alive",
    "listen",
    "new_session_id",
    "revoked",
    "session_capabilities",
    "sse_message",
    "still_listening",
]
