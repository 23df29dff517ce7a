"""`HttpUpstream`: one `mcp_http` source, a remote streamable-HTTP MCP server.

The gateway is the upstream's MCP client (`McpSession`, JSON-RPC over the upstream's pool of
keep-alive connections, `Http1Pool`). `run` opens the source's pool of `sessions` sessions
with the gateway's own credential (from the environment variable or the secret file the
source names, sent as "Bearer <credential>" in `credential_header`; an agent's token is never
passed through),
discovers the tools, resources and prompts, and keeps the pool open; an upstream that cannot
be reached or discovered is logged in one line and tried again every `retry_s`. Calls take
the pool's sessions in turn. A call is cancelled at its grant (TOOL_TIMEOUT) and carries the
time it has left to the upstream in `_meta`. Its answer is read as it arrives and cut at the
call's output cap (SANDBOX_OUTPUT_LIMIT: a hostile upstream's endless answer is never held
whole); while someone listens to the call's events, the call carries a `progressToken` and
the upstream's progress and log notifications on its answer's event stream become the
call's events.

A 2026-07-28 client's call to a source with `wire = "2026-07-28"` takes that revision's own
wire, outside the sessions (`upstream_rounds`): the upstream asks in rounds itself
(`InputRequiredResult`, relayed to the client by `/mcp`), never mid-call. A `resources/read`
or `prompts/get` from `/mcp` takes the same ways (`ask`, with a `ClientChannel`): its
own rounds on that wire, else the caller's client asked mid-request, within the source's
`intent` time limit when the client can be asked (`timeout_s` otherwise).

Requests to the client: the pool's sessions declare no client capabilities. A call whose
caller declared some (sampling, elicitation, roots: `CallEvents.capabilities`) runs on a
session opened with exactly those (one per shape, opened on first use and kept with the
pool), so the upstream asks only what the caller can answer. The upstream's requests on the
call's answer stream go to the caller (`CallEvents.request`), each answered on the session
(`McpSession.respond`) by `answer_deadline` at the latest; those still waiting when the call
ends are dropped with it.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import TaskGroup, TaskStatus
from pydantic import BaseModel, ConfigDict

from gateway.gateway_error import GatewayError
from gateway.sources.mcp_http.mcp_session import (
    PARSE_ERROR,
    McpSession,
    RpcError,
    UpstreamHttpError,
)
from gateway.sources.mcp_http.upstream_failure import unavailable, upstream_failure
from gateway.sources.mcp_http.upstream_rounds import call_params, check_wire, input_round
from gateway.sources.shared import (
    ANSWER_LIMIT,
    ClientChannel,
    ClientRequestCheck,
    Http1Pool,
    UpstreamTool,
    capability_missing,
    credential_headers,
    tool_error,
)
from protocol import (
    STATELESS_VERSION,
    CallUsage,
    ErrorCode,
    ExitReason,
    InputRound,
    SerfError,
)
from tools import ToolResult
from tools.calls import NO_CLIENT, CallEvents, Invocation, Outcome, answer_deadline
from tools.sources import McpHttpSource

log = logging.getLogger("conclave.upstreams")

# Meta keys the upstream reads its time from: its grant, and the caller's absolute deadline.
TIMEOUT_META = "conclave/timeout_ms"
DEADLINE_META = "conclave/deadline_ms"

# What an upstream's answer to a call may carry past the call's output cap: the JSON-RPC
# envelope, `_meta` and the content blocks' own fields around the tool's output. An answer
# longer than that is cut while it streams in (`Http1Pool`), before it is parsed.
ANSWER_OVERHEAD = 64 * 1024


def answer_limit(max_output_bytes: int) -> int:
    """The longest answer an upstream may send to a call capped at `max_output_bytes`."""
    return max(0, int(max_output_bytes)) + ANSWER_OVERHEAD


class _Named(BaseModel):
    """A listed resource (`uri`) or prompt (`name`): kept as the upstream sent it."""

    model_config = ConfigDict(extra="allow")

    uri: str | None = None
    name: str | None = None


@dataclass
class UpstreamCheck:
    """What `check_upstream` found: the served tools' own names, or why it could not."""

    tools: list[str] = field(default_factory=list)
    resources: int = 0
    prompts: int = 0
    error: str | None = None


class HttpUpstream:
    def __init__(self, source: McpHttpSource, *, timeout_s: float, retry_s: float) -> None:
        self.source = source
        self.timeout_s = timeout_s  # connecting and each discovery request
        self.retry_s = retry_s
        self.tools: dict[str, UpstreamTool] = {}  # by the upstream's own name
        self.resources: dict[str, dict[str, Any]] = {}  # by URI
        self.templates: list[dict[str, Any]] = []  # resource templates, as listed
        self.prompts: dict[str, dict[str, Any]] = {}  # by the upstream's own name
        self._sessions: list[McpSession] = []
        # Sessions declaring a caller's client capabilities, by their shape (JSON), on the
        # pool's connections and task group while it is open.
        self._asking: dict[str, McpSession] = {}
        self._pool: tuple[Http1Pool, TaskGroup] | None = None
        self._opening = anyio.Lock()
        self._turn = 0
        self._reopen = anyio.Event()

    @property
    def name(self) -> str:
        return self.source.name

    async def run(
        self,
        on_discovered: Callable[[HttpUpstream], None],
        *,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Hold the session pool open for good; `task_status` is told after the first try."""
        started = False
        while True:
            try:
                async with _closing(self._http()) as http, anyio.create_task_group() as background:
                    sessions = await self._open(http, background, self.source.sessions)
                    try:
                        self._sessions, self._pool = sessions, (http, background)
                        on_discovered(self)
                        if not started:
                            started = True
                            task_status.started()
                        await self._reopen.wait()
                    finally:
                        asking = list(self._asking.values())
                        self._sessions, self._pool, self._asking = [], None, {}
                        with anyio.CancelScope(shield=True):
                            for session in [*sessions, *asking]:
                                await session.close()
            except Exception as exc:
                log.warning(
                    "mcp_http source %r at %s is not served: %s; discovery is retried every %s s",
                    self.name,
                    self.source.url,
                    _reason(exc),
                    self.retry_s,
                )
            self._reopen = anyio.Event()
            if not started:
                started = True
                task_status.started()
            await anyio.sleep(self.retry_s)

    async def check(self) -> UpstreamCheck:
        """Connect once, discover, disconnect: what the source would serve, or why not."""
        try:
            async with _closing(self._http()) as http, anyio.create_task_group() as background:
                (session,) = await self._open(http, background, 1)
                await session.close()
        except Exception as exc:
            return UpstreamCheck(error=_reason(exc))
        return UpstreamCheck(list(self.tools), len(self.resources), len(self.prompts))

    def _http(self) -> Http1Pool:
        """The upstream's connections, shared by its sessions; reads are bounded by each
        request's own deadline (a call's grant, discovery's `timeout_s`)."""
        headers = credential_headers(self.source)
        return Http1Pool(str(self.source.url), headers, connect_timeout_s=self.timeout_s)

    async def _open(self, http: Http1Pool, background: TaskGroup, count: int) -> list[McpSession]:
        """`count` open sessions, and what the upstream serves discovered on the first."""
        sessions = [
            McpSession(http, background, notify_timeout_s=self.timeout_s) for _ in range(count)
        ]
        with anyio.fail_after(self.timeout_s):
            for session in sessions:
                await session.open()
            await self.discover(sessions[0])
        return sessions

    async def discover(self, session: McpSession) -> None:
        """List what the upstream serves (on `session`) and keep it."""
        if self.source.wire == STATELESS_VERSION:
            await check_wire(session, self.name)
        tools = [UpstreamTool.model_validate(t) for t in await _listed(session, "tools")]
        self.tools = {t.name: t for t in tools if self.source.serves(t.name)}
        if "resources" in session.capabilities:
            found = [_Named.model_validate(r) for r in await _listed(session, "resources")]
            self.resources = {r.uri: _shown(r) for r in found if r.uri}
            self.templates = await _templates(session)
        if "prompts" in session.capabilities:
            found = [_Named.model_validate(p) for p in await _listed(session, "prompts")]
            self.prompts = {p.name: _shown(p) for p in found if p.name}

    def _next_session(self) -> McpSession | None:
        if not self._sessions:
            return None
        self._turn = (self._turn + 1) % len(self._sessions)
        return self._sessions[self._turn]

    async def _session_for(self, capabilities: dict[str, Any]) -> McpSession | None:
        """A session declaring `capabilities` (the pool's own when there are none)."""
        if not capabilities:
            return self._next_session()
        shape = json.dumps(capabilities, sort_keys=True)
        async with self._opening:
            session = self._asking.get(shape)
            if session is None and self._pool is not None:
                http, background = self._pool
                session = McpSession(
                    http,
                    background,
                    notify_timeout_s=self.timeout_s,
                    client_capabilities=capabilities,
                )
                with anyio.fail_after(self.timeout_s):
                    await session.open()
                self._asking[shape] = session
            return session

    async def call(self, invocation: Invocation) -> Outcome:
        """Call the tool on the upstream within the call's grant; its failures as SERF."""
        began = time.perf_counter()
        started = anyio.current_time()
        # The upstream's own name (the served name may have had characters replaced).
        tool = invocation.placement.name
        timeout_ms = invocation.limits.timeout_ms
        meta: dict[str, Any] = {TIMEOUT_META: timeout_ms}
        if invocation.context.deadline_ms is not None:
            meta[DEADLINE_META] = invocation.context.deadline_ms
        events = invocation.events
        # A 2026-07-28 client's call to an upstream on that wire asks in rounds itself.
        client = invocation.client or NO_CLIENT
        declared = client.declared
        stateless = declared is not None and self.source.wire == STATELESS_VERSION
        try:
            if stateless:  # outside any session: any of the pool's connections carries it
                session = self._next_session()
            else:
                session = await self._session_for(dict(events.capabilities) if events else {})
        except Exception as exc:
            return self._failed(began, upstream_failure(self.name, exc))
        if session is None:
            return self._failed(began, unavailable(self.name, "no open session; reconnecting"))
        if events is not None:  # the upstream reports progress only when asked
            meta["progressToken"] = invocation.context.trace_id
        params: dict[str, Any] = {"name": tool, "arguments": invocation.arguments, "_meta": meta}
        if stateless:
            assert declared is not None
            params = call_params(params, declared, client.answer)
        result: dict[str, Any] | None = None
        limit = answer_limit(invocation.limits.max_output_bytes)
        notified = None if events is None else events.emit_notification
        stopped = anyio.CancelScope()
        asks = ClientRequestCheck(declared, stopped.cancel)
        try:
            with stopped, anyio.move_on_after(timeout_ms / 1000):
                if stateless:
                    result = await session.request_stateless(
                        "tools/call", params, name=tool, limit=limit, on_notification=notified
                    )
                elif events is None or not events.capabilities:
                    result = await self._request(
                        session, "tools/call", params, limit, notified, asks.asked
                    )
                else:
                    deadline = answer_deadline(started, timeout_ms)
                    result = await self._asking_call(session, params, limit, events, deadline, asks)
        except Exception as exc:
            return self._failed(began, upstream_failure(self.name, exc))
        if asks.missing:
            error = capability_missing(self.name, invocation.tool, asks.missing)
            return self._failed(began, error)
        if result is None:
            error = SerfError.of(
                ErrorCode.TOOL_TIMEOUT,
                f"{invocation.tool} ran past its grant of {timeout_ms} ms on upstream"
                f" {self.name!r}; the call was cancelled",
                details={"timeout_ms": timeout_ms, "killed_by": "gateway", "upstream": self.name},
            )
            return self._failed(began, error, ExitReason.TIMEOUT)
        if stateless:
            assert declared is not None
            asked = input_round(result, self.name, invocation.tool, declared)
            if isinstance(asked, SerfError):
                return self._failed(began, asked)
            if asked is not None:
                return Outcome(usage=self._usage(began), input_required=asked)
        if result.get("isError"):
            return self._failed(began, tool_error(self.name, invocation.tool, result))
        output = ToolResult.of_mcp(result, value=_value(result))
        return Outcome(usage=self._usage(began), result=output.value, output=output)

    async def _asking_call(
        self,
        session: McpSession,
        params: dict[str, Any],
        limit: int,
        events: CallEvents,
        deadline: float,
        asks: ClientRequestCheck,
        method: str = "tools/call",
    ) -> dict[str, Any]:
        """`tools/call` (or a read, a prompt: `method`) whose upstream may ask the caller
        things while it runs (what the request did not declare it may not ask: `asks` stops
        the call)."""

        def asked(message: dict[str, Any]) -> None:
            asks.asked(message)
            if not asks.missing:
                asking.start_soon(answer, message)

        async def answer(message: dict[str, Any]) -> None:
            reply = await events.request(message, deadline)
            # An upstream gone, or one that refuses the answer, is found by the call itself.
            with anyio.move_on_after(self.timeout_s), suppress(OSError, UpstreamHttpError):
                await session.respond(message["id"], reply)

        failed: Exception | None = None
        result: dict[str, Any] = {}
        async with anyio.create_task_group() as asking:
            try:
                result = await session.request(
                    method,
                    params,
                    limit=limit,
                    on_notification=events.emit_notification,
                    on_request=asked,
                )
            except Exception as exc:  # raised outside the group, not as an ExceptionGroup
                failed = exc
            asking.cancel_scope.cancel()  # its questions are moot once the call is answered
        if failed is not None:
            if isinstance(failed, UpstreamHttpError) and failed.status == 404:
                self._reopen.set()  # as `_request`: the upstream forgot the pool's sessions
            raise failed
        return result

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """One request to the upstream (a catalog method: read, complete, subscribe...)."""
        return await self._operation(method, params)

    async def ask(
        self, method: str, params: dict[str, Any], channel: ClientChannel
    ) -> dict[str, Any] | InputRound:
        """A read or a prompt at `/mcp`, whose upstream may ask the caller's client as a
        call's may: in rounds of its own on the 2026-07-28 wire (its round is returned, for
        `/mcp` to relay), else mid-request (`CallEvents.request`)."""
        declared = channel.client.declared
        events = channel.events
        stateless = declared is not None and self.source.wire == STATELESS_VERSION
        try:
            if stateless:
                session = self._next_session()
            else:
                session = await self._session_for(dict(events.capabilities) if events else {})
        except Exception as exc:
            raise GatewayError(upstream_failure(self.name, exc)) from exc
        if session is None:
            raise GatewayError(unavailable(self.name, "no open session; reconnecting"))
        what = str(params.get("name") or params.get("uri") or method)
        stopped = anyio.CancelScope()
        asks = ClientRequestCheck(declared, stopped.cancel)
        result: dict[str, Any] = {}
        # A request whose server may wait on the client's user has the time the source's
        # calls have (its `intent`), not only discovery's.
        asking = not stateless and events is not None and bool(events.capabilities)
        bound_s = max(self.timeout_s, self.source.intent.timeout_ms / 1000) if asking else None
        try:
            with stopped, anyio.fail_after(bound_s or self.timeout_s):
                if stateless:
                    assert declared is not None
                    sent = call_params(params, declared, channel.client.answer)
                    result = await session.request_stateless(method, sent, name=what)
                elif events is None or not events.capabilities:
                    result = await self._request(session, method, params, on_request=asks.asked)
                else:
                    assert events is not None and bound_s is not None
                    deadline = answer_deadline(anyio.current_time(), int(bound_s * 1000))
                    result = await self._asking_call(
                        session, params, ANSWER_LIMIT, events, deadline, asks, method
                    )
        except Exception as exc:
            raise GatewayError(upstream_failure(self.name, exc)) from exc
        if asks.missing:
            raise GatewayError(capability_missing(self.name, what, asks.missing))
        if stateless:
            assert declared is not None
            asked = input_round(result, self.name, what, declared)
            if isinstance(asked, SerfError):
                raise GatewayError(asked)
            if asked is not None:
                return asked
        return result

    async def _operation(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        session = self._next_session()
        if session is None:
            raise GatewayError(unavailable(self.name, "no open session; reconnecting"))
        try:
            with anyio.fail_after(self.timeout_s):
                return await self._request(session, method, params)
        except Exception as exc:
            raise GatewayError(upstream_failure(self.name, exc)) from exc

    async def _request(
        self,
        session: McpSession,
        method: str,
        params: dict[str, Any],
        limit: int = ANSWER_LIMIT,
        on_notification: Callable[[dict[str, Any]], None] | None = None,
        on_request: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        try:
            return await session.request(
                method,
                params,
                limit=limit,
                on_notification=on_notification,
                on_request=on_request,
            )
        except UpstreamHttpError as exc:
            if exc.status == 404 and session.session_id is not None:
                self._reopen.set()  # the upstream forgot the session: open a new pool
            raise

    def _usage(self, began: float, reason: ExitReason = ExitReason.OK) -> CallUsage:
        wall_ms = (time.perf_counter() - began) * 1000
        return CallUsage(wall_ms=wall_ms, exit_reason=reason, sandbox=f"mcp_http:{self.name}")

    def _failed(
        self, began: float, error: SerfError, reason: ExitReason = ExitReason.ERROR
    ) -> Outcome:
        return Outcome(usage=self._usage(began, reason), error=error)


async def check_upstream(source: McpHttpSource, *, timeout_s: float = 10.0) -> UpstreamCheck:
    """Connect to `source` once and discover what it serves (`conclave tools check`)."""
    return await HttpUpstream(source, timeout_s=timeout_s, retry_s=timeout_s).check()


@asynccontextmanager
async def _closing(http: Http1Pool) -> AsyncIterator[Http1Pool]:
    try:
        yield http
    finally:
        await http.aclose()


async def _templates(session: McpSession) -> list[dict[str, Any]]:
    """The upstream's resource templates; none when it does not serve the method."""
    try:
        listed = await _listed(session, "resourceTemplates", "resources/templates/list")
    except RpcError as exc:
        if exc.code == PARSE_ERROR:
            raise
        return []
    return [t for t in listed if isinstance(t, dict) and isinstance(t.get("uriTemplate"), str)]


async def _listed(session: McpSession, kind: str, method: str | None = None) -> list[Any]:
    """Every item of `<kind>/list` (or `method`), following the upstream's pages."""
    items: list[Any] = []
    params: dict[str, Any] = {}
    while True:
        page = await session.request(method or f"{kind}/list", params)
        found = page.get(kind)
        if not isinstance(found, list):
            raise RpcError(PARSE_ERROR, f"{kind}/list answered without a list of {kind}")
        items += found
        cursor = page.get("nextCursor")
        if not cursor:
            return items
        params = {"cursor": cursor}


def _shown(item: _Named) -> dict[str, Any]:
    return item.model_dump(mode="json", exclude_none=True)


def _text(result: dict[str, Any]) -> str:
    content = result.get("content") or []
    return "\n".join(str(c.get("text", "")) for c in content if _is_text(c))


def _is_text(item: Any) -> bool:
    return isinstance(item, dict) and item.get("type") == "text"


def _value(result: dict[str, Any]) -> Any:
    """The call's result as our tools answer it: the structured content (unwrapped when the
    server wrapped a plain value in {"result": ...}), else the text, else the content."""
    structured = result.get("structuredContent")
    if isinstance(structured, dict):
        meta = result.get("_meta") or {}
        wrapped = isinstance(meta, dict) and (meta.get("fastmcp") or {}).get("wrap_result")
        return structured.get("result") if wrapped and set(structured) == {"result"} else structured
    content = result.get("content") or []
    if all(_is_text(c) for c in content):
        return _text(result)
    return content


def _reason(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
