"""`McpSession`: one MCP session on a remote upstream, JSON-RPC over streamable HTTP.

A lean client, where the official SDK's session machinery (memory streams, task groups and
an SSE parser per call) cost the gateway several milliseconds a call. Each request is one
POST on the upstream's `Http1Pool` (shared by the source's sessions); the answer is read as
JSON, or, when the upstream answers `text/event-stream`, from its events (the upstream ends
the stream after the response to the request, which is picked by its id). `open` runs
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
from contextlib import suppress
from typing import Any

import anyio
from anyio.abc import TaskGroup

from gateway.sources.http1_pool import Http1Answer, Http1Pool
from gateway.tracing import TRACING, SpanKind, inject, mark_raised

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
    def __init__(self, http: Http1Pool, background: TaskGroup, *, notify_timeout_s: float) -> None:
        self.http = http
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
            "capabilities": {},
            "clientInfo": CLIENT_INFO,
        }
        request_id = next(self._ids)
        initialize = _request(request_id, "initialize", params)
        answer = await self.http.request("POST", headers, initialize)
        result = _result(answer, request_id)
        session_id = answer.headers.get(_SESSION_HEADER)
        if session_id:
            headers[_SESSION_HEADER] = session_id
        headers[_VERSION_HEADER] = str(result.get("protocolVersion", PROTOCOL_VERSION))
        self.capabilities = result.get("capabilities") or {}
        await self.notify("notifications/initialized", None, headers)
        self.headers = headers

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The result of `method`; RpcError, UpstreamHttpError or OSError if none."""
        if TRACING.on:
            return await self._traced(method, params)
        return await self._request(method, params, self.headers)

    async def _traced(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
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
                return await self._request(method, params, headers)
            except Exception as exc:
                mark_raised(span, exc)
                raise

    async def _request(
        self, method: str, params: dict[str, Any], headers: dict[str, str]
    ) -> dict[str, Any]:
        sent_session = headers.get(_SESSION_HEADER)
        request_id, answer = await self._post(method, params, headers)
        if answer.status == 404 and sent_session is not None:
            # The upstream forgot the session (it expired or the server restarted): it did
            # not process the request, so a new session may send it again.
            await self._reopen(sent_session)
            kept = {k: v for k, v in headers.items() if k not in _SESSION_HEADERS}
            request_id, answer = await self._post(method, params, {**kept, **self.headers})
        return _result(answer, request_id)

    async def _post(
        self, method: str, params: dict[str, Any], headers: dict[str, str]
    ) -> tuple[int, Http1Answer]:
        request_id = next(self._ids)
        try:
            answer = await self.http.request("POST", headers, _request(request_id, method, params))
        except anyio.get_cancelled_exc_class():
            self.background.start_soon(self._cancelled, request_id)
            raise
        return request_id, answer

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


def _result(answer: Http1Answer, request_id: int) -> dict[str, Any]:
    if answer.status >= 400:
        raise UpstreamHttpError(answer.status, _shown(answer.body))
    if answer.headers.get("content-type", "").startswith("text/event-stream"):
        message = _from_event_stream(answer.body, request_id)
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


def _from_event_stream(body: bytes, request_id: int) -> dict[str, Any]:
    """The response to `request_id` among the stream's events (the upstream's own
    notifications and requests before it are passed over)."""
    for event in body.decode("utf-8", "replace").replace("\r\n", "\n").split("\n\n"):
        data = [
            line[5:].removeprefix(" ") for line in event.split("\n") if line.startswith("data:")
        ]
        if not data:
            continue
        message = _message("\n".join(data))
        if message.get("id") == request_id and ("result" in message or "error" in message):
            return message
    raise RpcError(PARSE_ERROR, "the event stream ended without the response")


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
