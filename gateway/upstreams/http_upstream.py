"""`HttpUpstream`: one `mcp_http` source, a remote streamable-HTTP MCP server.

The gateway is the upstream's MCP client (the official `mcp` SDK). `run` opens the source's
pool of `sessions` sessions with the gateway's own credential (from the environment variable
or the secret file the source names, sent as "Bearer <credential>" in `credential_header`;
an agent's token is never passed through), discovers the tools, resources and prompts, and
keeps the pool open; an upstream that cannot be reached or discovered is logged in one line
and tried again every `retry_s`. Calls take the pool's sessions in turn. A call is cancelled
at its grant (TOOL_TIMEOUT) and carries the time it has left to the upstream in `_meta`.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Any

import anyio
import httpx2
import mcp_types as types
from anyio.abc import TaskStatus
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from gateway.gateway_error import GatewayError
from gateway.upstreams.upstream_failure import tool_error, unavailable, upstream_failure
from protocol import CallUsage, ErrorCode, ExitReason, SerfError
from sandbox import Invocation, Outcome
from tools.sources import McpHttpSource

log = logging.getLogger("conclave.upstreams")

# Meta keys the upstream reads its time from: its grant, and the caller's absolute deadline.
TIMEOUT_META = "conclave/timeout_ms"
DEADLINE_META = "conclave/deadline_ms"


class UpstreamConfigError(ValueError):
    """The source's configuration cannot work (its credential is missing): never retryable."""


def credential_headers(source: McpHttpSource) -> dict[str, str]:
    """The header carrying the gateway's credential for `source`, or none if it needs none."""
    if source.credential_env is not None:
        value = os.environ.get(source.credential_env)
        if not value:
            raise UpstreamConfigError(
                f"environment variable {source.credential_env} (credential_env) is not set"
            )
    elif source.credential_file is not None:
        try:
            value = source.credential_file.read_text("utf-8").strip()
        except OSError as exc:
            raise UpstreamConfigError(
                f"cannot read credential_file {source.credential_file}: {exc.strerror}"
            ) from exc
    else:
        return {}
    return {source.credential_header: f"Bearer {value}"}


class HttpUpstream:
    def __init__(self, source: McpHttpSource, *, timeout_s: float, retry_s: float) -> None:
        self.source = source
        self.timeout_s = timeout_s  # connecting and each discovery request
        self.retry_s = retry_s
        self.tools: dict[str, types.Tool] = {}  # by the upstream's own name
        self.resources: dict[str, types.Resource] = {}  # by URI
        self.prompts: dict[str, types.Prompt] = {}  # by the upstream's own name
        self._clients: list[Client] = []
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
                async with AsyncExitStack() as sessions:
                    clients = [
                        await sessions.enter_async_context(self._client(sessions))
                        for _ in range(self.source.sessions)
                    ]
                    await self._discover(clients[0])
                    self._clients = clients
                    on_discovered(self)
                    if not started:
                        started = True
                        task_status.started()
                    await self._reopen.wait()
            except Exception as exc:
                log.warning(
                    "mcp_http source %r at %s is not served: %s; discovery is retried every %s s",
                    self.name,
                    self.source.url,
                    _reason(exc),
                    self.retry_s,
                )
            finally:
                self._clients = []
            self._reopen = anyio.Event()
            if not started:
                started = True
                task_status.started()
            await anyio.sleep(self.retry_s)

    def _client(self, sessions: AsyncExitStack) -> Client:
        """A session's client; its HTTP client is closed with the pool (`sessions`)."""
        http = create_mcp_http_client(
            headers=credential_headers(self.source),
            timeout=httpx2.Timeout(self.timeout_s, read=None),  # reads: each call's own grant
        )
        sessions.push_async_callback(http.aclose)
        transport = streamable_http_client(str(self.source.url), http_client=http)
        return Client(transport, read_timeout_seconds=self.timeout_s, cache=None)

    async def _discover(self, client: Client) -> None:
        listed = await client.list_tools()
        self.tools = {t.name: t for t in listed.tools if self.source.serves(t.name)}
        capabilities = client.server_capabilities
        if capabilities.resources is not None:
            found = await client.list_resources()
            self.resources = {str(r.uri): r for r in found.resources}
        if capabilities.prompts is not None:
            prompts = await client.list_prompts()
            self.prompts = {p.name: p for p in prompts.prompts}

    def _next_client(self) -> Client | None:
        if not self._clients:
            return None
        self._turn = (self._turn + 1) % len(self._clients)
        return self._clients[self._turn]

    async def call(self, invocation: Invocation) -> Outcome:
        """Call the tool on the upstream within the call's grant; its failures as SERF."""
        began = time.perf_counter()
        tool = invocation.tool.removeprefix(f"{self.name}.")
        timeout_ms = invocation.limits.timeout_ms
        meta: dict[str, Any] = {TIMEOUT_META: timeout_ms}
        if invocation.context.deadline_ms is not None:
            meta[DEADLINE_META] = invocation.context.deadline_ms
        client = self._next_client()
        if client is None:
            return self._failed(began, unavailable(self.name, "no open session; reconnecting"))
        result: types.CallToolResult | None = None
        try:
            with anyio.move_on_after(timeout_ms / 1000):
                result = await client.call_tool(
                    tool,
                    invocation.arguments,
                    meta=meta,  # type: ignore[arg-type]
                )
        except Exception as exc:
            return self._failed(began, upstream_failure(self.name, exc))
        if result is None:
            error = SerfError.of(
                ErrorCode.TOOL_TIMEOUT,
                f"{invocation.tool} ran past its grant of {timeout_ms} ms on upstream"
                f" {self.name!r}; the call was cancelled",
                details={"timeout_ms": timeout_ms, "killed_by": "gateway", "upstream": self.name},
            )
            return self._failed(began, error, ExitReason.TIMEOUT)
        if result.is_error:
            return self._failed(began, tool_error(self.name, invocation.tool, _text(result)))
        return Outcome(usage=self._usage(began), result=_value(result))

    async def read_resource(self, uri: str) -> dict[str, Any]:
        client = self._require_client()
        try:
            found = await client.read_resource(uri)
        except Exception as exc:
            raise GatewayError(upstream_failure(self.name, exc)) from exc
        return found.model_dump(mode="json", by_alias=True, exclude_none=True)

    async def get_prompt(self, name: str, arguments: dict[str, str] | None) -> dict[str, Any]:
        client = self._require_client()
        try:
            found = await client.get_prompt(name, arguments)
        except Exception as exc:
            raise GatewayError(upstream_failure(self.name, exc)) from exc
        return found.model_dump(mode="json", by_alias=True, exclude_none=True)

    def _require_client(self) -> Client:
        client = self._next_client()
        if client is None:
            raise GatewayError(unavailable(self.name, "no open session; reconnecting"))
        return client

    def _usage(self, began: float, reason: ExitReason = ExitReason.OK) -> CallUsage:
        wall_ms = (time.perf_counter() - began) * 1000
        return CallUsage(wall_ms=wall_ms, exit_reason=reason, sandbox=f"mcp_http:{self.name}")

    def _failed(
        self, began: float, error: SerfError, reason: ExitReason = ExitReason.ERROR
    ) -> Outcome:
        return Outcome(usage=self._usage(began, reason), error=error)


def _text(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def _value(result: types.CallToolResult) -> Any:
    """The call's result as our tools answer it: the structured content (unwrapped when the
    server wrapped a plain value in {"result": ...}), else the text, else the content."""
    structured = result.structured_content
    if structured is not None:
        wrapped = (result.meta or {}).get("fastmcp", {}).get("wrap_result")
        return structured.get("result") if wrapped and set(structured) == {"result"} else structured
    if all(isinstance(c, types.TextContent) for c in result.content):
        return _text(result)
    return [json.loads(c.model_dump_json(by_alias=True)) for c in result.content]


def _reason(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
