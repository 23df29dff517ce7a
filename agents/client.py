"""`GatewayClient`: one agent's pooled HTTP connection to the gateway.

Tools, shared state, leases, commits and history, each a typed method over the wire models
in `protocol/`. Time budgets travel as headers (`X-Conclave-Deadline`, `-Plan`, `-Reserve`).
Every refusal raises `GatewayCallError` carrying the gateway's SERF envelope.

Recovery is a small seam: `retry` decides, from the SERF envelope alone, whether and after
how long to resend. The default resends only what the gateway marks `retry_same` or
`retry_backoff` (rate limits, sandboxes or Redis briefly away), a few times; conflicts
(`reread_and_retry`, `reacquire`) go back to the caller, who must reread before retrying.

Every request carries the W3C `traceparent` of the caller's current OpenTelemetry span, and
while the application traces, each tool call and commit is a span of its own: the agent's
run and the gateway's spans form one trace.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import anyio
import httpx
from opentelemetry import trace
from opentelemetry.propagate import inject

from agents.agent_errors import GatewayCallError, error_from_response, error_from_transport
from agents.delegation import (
    WORKING,
    WORKING_FOR,
    Delegated,
    get_task_request,
    reply_reader,
    send_message_request,
)
from protocol import (
    A2A_VERSION,
    A2A_VERSION_HEADER,
    ADMIN_KEY_HEADER,
    DEADLINE_HEADER,
    HEDGE_HEADER,
    PLAN_HEADER,
    RESERVE_HEADER,
    SESSION_HEADER,
    AgentRegistration,
    AgentToken,
    Budget,
    CommitRequest,
    CommitResult,
    HistoryEntry,
    LeaseGrants,
    LeaseRequest,
    NamespaceConfig,
    ReadResult,
    RecoveryAction,
    ResourceRequest,
    SerfError,
    ToolCallRequest,
    ToolCallResult,
    ToolSpec,
)

RetryDecision = Callable[[SerfError, int], float | None]  # -> seconds to wait, or None: raise


def retry_transient(max_attempts: int = 4) -> RetryDecision:
    """Resend what the gateway says to resend as-is, waiting `retry_after_ms` (or backoff)."""

    def decide(error: SerfError, attempt: int) -> float | None:
        if attempt >= max_attempts or not error.retryable:
            return None
        if error.action not in (RecoveryAction.RETRY_SAME, RecoveryAction.RETRY_BACKOFF):
            return None
        if error.retry_after_ms is not None:
            return error.retry_after_ms / 1000
        return 0.0 if error.action is RecoveryAction.RETRY_SAME else 0.05 * 2**attempt

    return decide


def budget_headers(budget: Budget | None) -> dict[str, str]:
    if budget is None:
        return {}
    headers: dict[str, str] = {}
    if budget.deadline_ms is not None:
        headers[DEADLINE_HEADER] = str(budget.deadline_ms)
    if budget.plan:
        headers[PLAN_HEADER] = ",".join(budget.plan)
    if budget.reserve_ms:
        headers[RESERVE_HEADER] = str(budget.reserve_ms)
    if not budget.hedge:
        headers[HEDGE_HEADER] = "off"
    return headers


def _with_trace_context(headers: dict[str, str] | None) -> dict[str, str] | None:
    """`headers` plus the W3C `traceparent` of the current OpenTelemetry span, if there is one,
    so the gateway's spans join the agent's trace."""
    carrier: dict[str, str] = {}
    inject(carrier)
    return {**(headers or {}), **carrier} if carrier else headers


def _span(name: str, attributes: dict[str, str]) -> AbstractContextManager[object]:
    """A client span around one gateway call while the application traces (it installed an
    OpenTelemetry SDK provider); otherwise nothing, and the current context passes as is."""
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return nullcontext()
    tracer = provider.get_tracer("conclave.agents")
    return tracer.start_as_current_span(name, kind=trace.SpanKind.CLIENT, attributes=attributes)


def _read_answer(response: httpx.Response) -> Any:
    if response.status_code < 400:
        return response.json() if response.content else None
    raise error_from_response(response)


class GatewayClient:
    """Async client for one identity (an agent token, or the admin key for registration)."""

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        admin_key: str | None = None,
        session: str | None = None,
        budget: Budget | None = None,
        retry: RetryDecision | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout_s: float = 120.0,
    ) -> None:
        headers: dict[str, str] = {}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if admin_key:
            headers[ADMIN_KEY_HEADER] = admin_key
        if session:
            headers[SESSION_HEADER] = session
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.session = session
        self.budget = budget
        self._retry = retry or retry_transient()
        limits = httpx.Limits(max_connections=64, max_keepalive_connections=16)
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            headers=headers,
            transport=transport,
            timeout=timeout_s,
            limits=limits,
        )
        self._transport = transport

    def for_token(self, token: str, *, session: str | None = None) -> GatewayClient:
        """A new client for another identity on the same gateway (and the same transport)."""
        return GatewayClient(
            self.base_url,
            token,
            session=session,
            budget=self.budget,
            retry=self._retry,
            transport=self._transport,
        )

    async def _request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        headers: dict[str, str] | None = None,
        read: Callable[[httpx.Response], Any] | None = None,
    ) -> Any:
        """The answer as `read` reads it (by default: the JSON of a success, a SERF envelope's
        error raised), resent as `retry` decides when the error says to."""
        attempt = 0
        headers = _with_trace_context(headers)
        if (task := WORKING_FOR.get()) is not None:  # a worker's request for its task
            headers = task.headers(headers, self.token)
        while True:
            try:
                response = await self._http.request(method, path, json=json, headers=headers)
            except httpx.HTTPError as exc:
                error = error_from_transport(exc, self.base_url)
            else:
                try:
                    return (read or _read_answer)(response)
                except GatewayCallError as exc:
                    error = exc
            attempt += 1
            wait_s = self._retry(error.serf, attempt)
            if wait_s is None:
                raise error
            await anyio.sleep(wait_s)

    # --- identity -----------------------------------------------------------------------

    async def register_agent(self, registration: AgentRegistration) -> AgentToken:
        """Admin only: give an agent its own identity and scopes."""
        body = registration.model_dump(mode="json")
        return AgentToken.model_validate(await self._request("POST", "/v1/agents", json=body))

    # --- tools --------------------------------------------------------------------------

    async def list_tools(self) -> list[ToolSpec]:
        payload = await self._request("GET", "/v1/tools")
        items = payload.get("tools", payload) if isinstance(payload, dict) else payload
        return [ToolSpec.model_validate(item) for item in items]

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        limits: ResourceRequest | None = None,
        budget: Budget | None = None,
    ) -> ToolCallResult:
        body = ToolCallRequest(arguments=arguments or {}, limits=limits)
        with _span(f"call {name}", {"conclave.tool": name}):
            payload = await self._request(
                "POST",
                f"/v1/tools/{name}/call",
                json=body.model_dump(mode="json", exclude_none=True),
                headers=budget_headers(budget or self.budget),
            )
        return ToolCallResult.model_validate(payload)

    # --- agents (A2A) --------------------------------------------------------------------

    async def delegate(
        self,
        agent: str,
        text: str,
        *,
        task_id: str | None = None,
        context_id: str | None = None,
        budget: Budget | None = None,
    ) -> Delegated:
        """Send `text` to the A2A agent `agent` through the gateway, as this identity (its
        registration's `agents` must name it), the budget's deadline travelling with it;
        `task_id` continues a task (one that asked for input). The reply comes once the task
        is done or needs input (an agent that answers while it still works is asked again).
        Refusals and the agent's own errors raise `GatewayCallError` (the hop named)."""
        headers = {A2A_VERSION_HEADER: A2A_VERSION, **budget_headers(budget or self.budget)}
        read = reply_reader(agent)
        with _span(f"delegate {agent}", {"conclave.a2a_agent": agent}):
            body = send_message_request(text, task_id=task_id, context_id=context_id)
            reply: Delegated = await self._request(
                "POST", f"/a2a/{agent}", json=body, headers=headers, read=read
            )
            wait_s = 0.05
            while reply.state in WORKING and reply.task_id is not None:
                await anyio.sleep(wait_s)
                wait_s = min(1.0, wait_s * 2)
                reply = await self._request(
                    "POST", f"/a2a/{agent}", json=get_task_request(reply.task_id),
                    headers=headers, read=read,
                )  # fmt: skip
        return reply

    # --- shared state -------------------------------------------------------------------

    async def create_namespace(self, namespace: str, config: NamespaceConfig) -> None:
        await self._request("PUT", f"/v1/state/{namespace}", json=config.model_dump(mode="json"))

    async def read(self, namespace: str, key: str) -> ReadResult:
        return ReadResult.model_validate(await self._request("GET", f"/v1/state/{namespace}/{key}"))

    async def acquire(self, namespace: str, keys: list[str], ttl_ms: int = 10_000) -> LeaseGrants:
        body = LeaseRequest(keys=keys, ttl_ms=ttl_ms).model_dump(mode="json")
        payload = await self._request("POST", f"/v1/state/{namespace}/leases", json=body)
        return LeaseGrants.model_validate(payload)

    async def release(self, namespace: str, key: str) -> None:
        await self._request("DELETE", f"/v1/state/{namespace}/leases/{key}")

    async def commit(self, namespace: str, request: CommitRequest) -> CommitResult:
        body = request.model_dump(mode="json", exclude_none=True)
        with _span(f"commit {namespace}", {"conclave.namespace": namespace}):
            payload = await self._request("POST", f"/v1/state/{namespace}/commit", json=body)
        return CommitResult.model_validate(payload)

    async def history(self, namespace: str, *, page: int = 1000) -> list[HistoryEntry]:
        """Every commit of the namespace, in commit order (the gateway pages it)."""
        entries: list[HistoryEntry] = []
        after: str | None = None
        while True:
            query = f"?limit={page}" + (f"&after={after}" if after else "")
            payload = await self._request("GET", f"/v1/state/{namespace}/history{query}")
            batch = [HistoryEntry.model_validate(item) for item in payload["entries"]]
            entries += batch
            if len(batch) < page:
                return entries
            after = batch[-1].commit_id

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> GatewayClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
