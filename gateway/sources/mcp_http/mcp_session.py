"""`McpSession`: one MCP session on a remote upstream, JSON-RPC over streamable HTTP.

A lean client, where the official SDK's session machinery (memory streams, task groups and
an SSE parser per call) cost the gateway several milliseconds a call. Each request is one
POST on the upstream's `Http1Pool` (shared by the source's sessions); the answer is read as
JSON, or, when the upstream answers `text/event-stream`, from its events as they arrive (the
upstream ends the stream after the response to the request, which is picked by its id; the
notifications before it go to the request's `on_notification`, e.g. a call's progress, and
the upstream's own requests to its `on_request`, e.g. an elicitation, answered by `respond`).
A session tells the upstream it is a client with the `client_capabilities` it is opened with
(the calling client's: sampling, elicitation, roots), and no other. An
answer is read no further than the request's `limit` (`Http1Pool`). `open` runs
`initialize` and keeps the `Mcp-Session-Id` the upstream issues (stateless upstreams issue
none) and the negotiated protocol version for every later request. A request cancelled by
its caller (its grant ran out, or the agent cancelled the call or went away: the request's
connection is closed) is followed by `notifications/cancelled`, sent in
`background`, since an upstream must not read a dropped connection as a cancel. While
tracing is on, each request is a client span and carries its W3C `traceparent`.

A session the upstream no longer knows (it expired, or the server restarted: HTTP 404 for
the session id, as the transport says) is initialized again at once, by the first request
that meets the 404 (the others wait for it), and that request is sent once more. This is
safe for every method, a `tools/call` too: a 404 for the session means the upstream did not
process the request. A connection the upstream closed is retried by `Http1Pool` itself.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.abc import TaskGroup

from gateway.sources.shared import ANSWER_LIMIT, Http1Answer, Http1Pool
from gateway.telemetry import TRACING, SpanKind, inject, mark_raised
from protocol import STATELESS_VERSION

PROTOCOL_VERSION = "2025-06-18"
CLIENT_INFO = {"name": "conclave-gateway", "version": "0.1.0"}
PARSE_ERROR = -32700
_SESSION_HEADER = "mcp-session-id"
_VERSION_HEADER = "mcp-protocol-version"
_SESSION_HEADERS = (_SESSION_HEADER, _VERSION_HEADER)  # what a session's own headers are


class RpcError(Exception):
    """The upstream's JSON-RPC error answer; PARSE_ERROR for an answer that is not JSON-RPC."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class UpstreamHttpError(Exception):
    """The upstream answered an HTTP error status instead of JSON-RPC."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(f"HTTP {status}: {text}" if text else f"HTTP {status}")
        self.status = status


class McpSession:
    def __init__(
        self,
        http: Http1Pool,
        background: TaskGroup,
        *,
        notify_timeout_s: float,
        client_capabilities: dict[str, Any] | None = None,
    ) -> None:
        self.http = http
        self.client_capabilities = client_capabilities or {}
        self.background = background
        self.notify_timeout_s = notify_timeout_s
        self.headers = {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
        }
        self.capabilities: dict[str, Any] = {}
        self._ids = itertools.count(1)
        self._reopening = anyio.Lock()

    @property
    def session_id(self) -> str | None:
        return self.headers.get(_SESSION_HEADER)

    async def open(self) -> None:
        """`initialize`, then `notifications/initialized`: the session's id and version.
        The headers are swapped in whole once the session is ready, so a request sent
        meanwhile carries the old session (and is sent again if that one is gone)."""
        headers = {k: v for k, v in self.headers.items() if k not in _SESSION_HEADERS}
        params = {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": self.client_capabilities,
            "clientInfo": CLIENT_INFO,
        }
        request_id = next(self._ids)
        events = _EventStream(request_id)
        initialize = _request(request_id, "initialize", params)
        answer = await self.http.request("POST", headers, initialize, body_sink=events.sink_for)
        result = _result(answer, request_id, events)
        session_id = answer.headers.get(_SESSION_HEADER)
        if session_id:
            headers[_SESSION_HEADER] = session_id
        headers[_VERSION_HEADER] = str(result.get("protocolVersion", PROTOCOL_VERSION))
        self.capabilities = result.get("capabilities") or {}
        await self.notify("notifications/initialized", None, headers)
        self.headers = headers

    async def request(
        self,
        method: str,
        params: dict[str, Any],
        *,
        limit: int = ANSWER_LIMIT,
        on_notification: Notified | None = None,
        on_request: Notified | None = None,
    ) -> dict[str, Any]:
        """The result of `method`, its answer read to at most `limit` bytes; RpcError,
        UpstreamHttpError or OSError (`AnswerTooLarge`) if none. The upstream's
        notifications while it answers go to `on_notification`, its requests to
        `on_request` (each is answered with `respond`)."""
        heard = _Heard(on_notification, on_request)
        if TRACING.on:
            return await self._traced(method, params, limit, heard)
        return await self._request(method, params, self.headers, limit, heard)

    async def request_stateless(
        self,
        method: str,
        params: dict[str, Any],
        *,
        name: str | None = None,
        limit: int = ANSWER_LIMIT,
        on_notification: Notified | None = None,
    ) -> dict[str, Any]:
        """`method` on MCP 2026-07-28's wire: outside the session, with the headers that
        revision asks (`params` carries its `_meta`; `name` is the `Mcp-Name` header's). A
        cancelled request is cancelled by its closed connection alone, as that wire says."""
        headers = {k: v for k, v in self.headers.items() if k not in _SESSION_HEADERS}
        headers[_VERSION_HEADER] = STATELESS_VERSION
        headers["mcp-method"] = method
        if name is not None:
            headers["mcp-name"] = name
        heard = _Heard(on_notification)
        request_id, answer, events = await self._post(
            method, params, headers, limit, heard, notify_cancel=False
        )
        return _result(answer, request_id, events)

    async def respond(self, request_id: object, answer: dict[str, Any]) -> None:
        """Answer the upstream's request `request_id` (`answer`: its `result` or `error`)."""
        message = {"jsonrpc": "2.0", "id": request_id, **answer}
        posted = await self.http.request("POST", self.headers, json.dumps(message).encode())
        if posted.status >= 400:
            raise UpstreamHttpError(posted.status, _shown(posted.body))

    async def _traced(
        self,
        method: str,
        params: dict[str, Any],
        limit: int = ANSWER_LIMIT,
        heard: _Heard | None = None,
    ) -> dict[str, Any]:
        """The request in a client span, whose W3C `traceparent` the upstream receives."""
        attributes: dict[str, str | int] = {
            "rpc.system": "jsonrpc",
            "rpc.method": method,
            "server.address": self.http.host,
            "server.port": self.http.port,
        }
        with TRACING.span(f"mcp {method}", attributes, SpanKind.CLIENT) as span:
            headers = dict(self.headers)
            inject(headers)
            try:
                return await self._request(method, params, headers, limit, heard)
            except Exception as exc:
                mark_raised(span, exc)
                raise

    async def _request(
        self,
        method: str,
        params: dict[str, Any],
        headers: dict[str, str],
        limit: int = ANSWER_LIMIT,
        heard: _Heard | None = None,
    ) -> dict[str, Any]:
        sent_session = headers.get(_SESSION_HEADER)
        request_id, answer, events = await self._post(method, params, headers, limit, heard)
        if answer.status == 404 and sent_session is not None:
            # The upstream forgot the session (it expired or the server restarted): it did
            # not process the request, so a new session may send it again.
            await self._reopen(sent_session)
            kept = {k: v for k, v in headers.items() if k not in _SESSION_HEADERS}
            request_id, answer, events = await self._post(
                method, params, {**kept, **self.headers}, limit, heard
            )
        return _result(answer, request_id, events)

    async def _post(
        self,
        method: str,
        params: dict[str, Any],
        headers: dict[str, str],
        limit: int,
        heard: _Heard | None,
        *,
        notify_cancel: bool = True,
    ) -> tuple[int, Http1Answer, _EventStream]:
        request_id = next(self._ids)
        events = _EventStream(request_id, heard)
        try:
            answer = await self.http.request(
                "POST",
                headers,
                _request(request_id, method, params),
                limit=limit,
                body_sink=events.sink_for,
            )
        except anyio.get_cancelled_exc_class():
            if notify_cancel:
                self.background.start_soon(self._cancelled, request_id)
            raise
        return request_id, answer, events

    async def _reopen(self, forgotten: str) -> None:
        """Initialize a new session in place of `forgotten`, unless another request has."""
        async with self._reopening:
            if self.session_id == forgotten:
                await self.open()

    async def notify(
        self, method: str, params: dict[str, Any] | None, headers: dict[str, str] | None = None
    ) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        body = json.dumps(message).encode()
        answer = await self.http.request("POST", headers or self.headers, body)
        if answer.status >= 400:
            raise UpstreamHttpError(answer.status, _shown(answer.body))

    async def close(self) -> None:
        """End the session on the upstream, if it issued one (best effort)."""
        if _SESSION_HEADER in self.headers:  # else the upstream keeps none to end
            with anyio.move_on_after(self.notify_timeout_s), suppress(OSError):
                await self.http.request("DELETE", self.headers)

    async def _cancelled(self, request_id: int) -> None:
        params = {"requestId": request_id, "reason": "the gateway's caller no longer waits"}
        # Best effort: the call has been answered already, and the upstream may be down.
        with anyio.move_on_after(self.notify_timeout_s), suppress(OSError, UpstreamHttpError):
            await self.notify("notifications/cancelled", params)


def _request(request_id: int, method: str, params: dict[str, Any]) -> bytes:
    message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    return json.dumps(message).encode()


Notified = Callable[[dict[str, Any]], object]  # what it returns is not read


@dataclass(frozen=True)
class _Heard:
    """Where the upstream's messages while it answers a request go (None: nowhere)."""

    notification: Notified | None = None
    request: Notified | None = None


class _EventStream:
    """An event-stream answer read as it arrives: the response to `request_id` kept, the
    upstream's notifications and requests before it passed to `heard`."""

    def __init__(self, request_id: int, heard: _Heard | None = None) -> None:
        self.request_id = request_id
        self.heard = heard or _Heard()
        self.response: dict[str, Any] | None = None
        self._buffer = bytearray()

    def sink_for(self, status: int, headers: dict[str, str]) -> Callable[[bytes], None] | None:
        streams = headers.get("content-type", "").startswith("text/event-stream")
        return self.feed if status < 400 and streams else None

    def feed(self, chunk: bytes) -> None:
        start = max(0, len(self._buffer) - 3)  # a boundary may straddle the chunks
        self._buffer += chunk
        while True:
            ends = [
                (i, len(sep))
                for sep in (b"\n\n", b"\r\n\r\n")
                if (i := self._buffer.find(sep, start)) >= 0
            ]
            if not ends:
                return
            end, size = min(ends)
            event = bytes(self._buffer[:end]).replace(b"\r\n", b"\n")
            del self._buffer[: end + size]
            start = 0
            self._event(event.decode("utf-8", "replace"))

    def _event(self, event: str) -> None:
        data = [
            line[5:].removeprefix(" ") for line in event.split("\n") if line.startswith("data:")
        ]
        if not data or self.response is not None:
            return
        message = _message("\n".join(data))
        if message.get("id") == self.request_id and ("result" in message or "error" in message):
            self.response = message
        elif "id" not in message and self.heard.notification is not None:
            self.heard.notification(message)
        elif "method" in message and "id" in message and self.heard.request is not None:
            self.heard.request(message)

    def finish(self) -> dict[str, Any]:
        if self._buffer.strip():
            self.feed(b"\n\n")  # a last event without its blank line
        if self.response is None:
            raise RpcError(PARSE_ERROR, "the event stream ended without the response")
        return self.response


def _result(answer: Http1Answer, request_id: int, events: _EventStream) -> dict[str, Any]:
    if answer.status >= 400:
        raise UpstreamHttpError(answer.status, _shown(answer.body))
    if events.sink_for(answer.status, answer.headers) is not None:
        message = events.finish()
    else:
        message = _message(answer.body)
    if "error" in message:
        error = message["error"] if isinstance(message["error"], dict) else {}
        code = error.get("code")
        raise RpcError(code if isinstance(code, int) else 0, str(error.get("message", "")))
    result = message.get("result")
    if message.get("id") != request_id or not isinstance(result, dict):
        raise RpcError(PARSE_ERROR, "the answer is not the JSON-RPC response to the request")
    return result


def _message(body: bytes | str) -> dict[str, Any]:
    try:
        message = json.loads(body)
    except ValueError as exc:
        raise RpcError(PARSE_ERROR, f"the answer is not JSON: {_shown(body)!r}") from exc
    if not isinstance(message, dict):
        raise RpcError(PARSE_ERROR, "the answer is not a JSON-RPC message")
    return message


def _shown(body: bytes | str) -> str:
    return (body.decode("utf-8", "replace") if isinstance(body, bytes) else body)[:200]
