"""One A2A request forwarded to its agent, as the dispatch stage's action: the caller's own
tasks only, the gateway's credential and the caller's identity and deadline on the way, the
answer read under a cap and checked on the way back.

- A push-notification method to an agent whose card declares no push notifications is
  PushNotificationNotSupportedError, whatever task it names (as the agent would answer).
- A request naming a task another identity created (or one never seen here) is refused
  TaskNotFoundError before anything is sent (`TaskOwners`); a task the agent creates for a
  caller is bound to that caller as its answer (or its stream's first event) names it.
- A push-notification config's URL must resolve to public addresses only (INVALID_ARGUMENTS
  otherwise), as a sandbox's egress must: the agent would send to it from its own network.
- ListTasks answers only the caller's tasks (a page holds those of the agent's page that are).
- Upstream: the agent's interface for the binding (its card), the caller's body as it came,
  the A2A headers it sent (`A2A-Version`, `A2A-Extensions`), the caller's identity
  (`X-Conclave-Tenant`, `-Agent`, `-On-Behalf-Of`), trace and deadline, and the delegation
  chain signed for the agent to pass on (`X-Conclave-Chain`); never the caller's token.
- A task the agent creates for a request made for a hosted task (its chain names one) is
  recorded as that task's child (`HostedTasks.adopt`), so it is cancelled when that task
  ends (`cancel_task`, the gateway's own CancelTask to the agent).
- A SendMessage under a deadline carries ATBA's share of it (`onward_deadline_ms`): the
  agent is told that deadline, and the request ends there (or at the agent's `timeout_s`),
  DEADLINE_EXCEEDED; a stream is cut there. How long a SendMessage whose answer says the work
  is done took (censored when cut) goes to its window (`ctx.delegation_sample`, learnt by the
  account stage). An answer over `max_answer_bytes` is cut while it
  arrives (INVALID_AGENT_RESPONSE); an agent that cannot be reached is UPSTREAM_UNAVAILABLE;
  one that answers something that is not JSON is INVALID_AGENT_RESPONSE.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

import anyio
import httpx
from starlette.responses import Response, StreamingResponse

from gateway.a2a.a2a_errors import PUSH_NOT_SUPPORTED, a2a_failure, task_not_found
from gateway.a2a.a2a_methods import PUSH_METHODS, A2aRequest, task_id_of
from gateway.a2a.hosted_tasks import ENDED, INTERRUPTED, HostedTasks, task_ref
from gateway.a2a.remote_agents import HTTP_JSON, JSONRPC, RemoteAgent, garbage, unavailable
from gateway.a2a.task_owners import TaskOwners
from gateway.budgets import LatencySample
from gateway.delegation import onward_deadline_ms
from gateway.egress import EgressRefused, public_addresses
from gateway.gateway_error import GatewayError
from gateway.pipeline import RequestContext
from gateway.sources.shared import AnswerTooLarge, UpstreamClosed
from protocol import CHAIN_HEADER, ErrorCode, Principal

# Kept as they are when a caller's (decoded) path is quoted again for the agent: RFC 3986's
# path characters. Anything else (a space, a CR or LF) is sent %-encoded, never raw.
_PATH_SAFE = "/:@!$&'()*+,;=-._~"
_PASSED_ON = ("content-type", "accept", "a2a-version", "a2a-extensions")
_STREAM_TYPE = "text/event-stream"


@dataclass(frozen=True)
class A2aCall:
    """What the transport read: the agent, the request, and how to send it on."""

    agent: RemoteAgent
    request: A2aRequest
    verb: str  # "POST" for JSON-RPC
    path: str  # under the binding's URL ("" for JSON-RPC)
    query: str
    body: bytes

    @property
    def binding(self) -> str:
        return JSONRPC if self.path == "" and self.verb == "POST" else HTTP_JSON


class A2aForwarder:
    def __init__(self, owners: TaskOwners, max_answer_bytes: int, children: HostedTasks) -> None:
        self.owners = owners
        self.max_answer_bytes = max_answer_bytes
        self.children = children  # where a task done for a hosted task is recorded

    async def cancel_task(self, agent: RemoteAgent, task_id: str, reason: str) -> None:
        """Ask `agent` to cancel its task `task_id` (what it was done for ended): JSON-RPC
        CancelTask with the gateway's credential; an agent that cannot is left to its own
        timeout (the task is over for its caller either way)."""
        body = {"jsonrpc": "2.0", "id": 1, "method": "CancelTask", "params": {"id": task_id}}
        target = urlsplit(await agent.interface(JSONRPC)).path or "/"
        headers = {"content-type": "application/json", "a2a-version": "1.0"}
        with anyio.move_on_after(agent.config.timeout_s):
            try:
                await agent.pool.request(
                    "POST", headers, json.dumps(body).encode(), limit=65536, target=target
                )
            except (OSError, UpstreamClosed, AnswerTooLarge):
                return

    async def forward(self, ctx: RequestContext, call: A2aCall) -> Response:
        principal = ctx.require_principal()
        agent, request = call.agent, call.request
        if request.method in PUSH_METHODS and not await agent.sends_pushes():
            raise a2a_failure(
                PUSH_NOT_SUPPORTED,
                ErrorCode.METHOD_NOT_FOUND,
                f"A2A agent {agent.name!r} sends no push notifications (its card says so):"
                " poll GetTask or subscribe instead",
            )
        if request.task_id is not None and not await self.owners.holds(
            agent.name, request.task_id, principal
        ):
            raise task_not_found(agent.name, request.task_id)
        if request.push_url is not None:
            await _check_push_url(request.push_url)
        base = urlsplit(await agent.interface(call.binding))
        target = base.path.rstrip("/") + quote(call.path, safe=_PATH_SAFE)
        if call.query:
            target += f"?{call.query}"
        deadline = _agent_deadline(ctx)
        headers = _headers(ctx, principal, deadline)
        left_s = _time_left_s(deadline, agent.config.timeout_s)
        if request.streams:
            return await self._stream(ctx, call, principal, target, headers, left_s)
        began = time.monotonic()
        try:
            with anyio.fail_after(left_s):
                answer = await agent.pool.request(
                    call.verb, headers, call.body, limit=self.max_answer_bytes, target=target or "/"
                )
        except TimeoutError as exc:
            _learn(ctx, began, censored=True)  # it would have taken at least this
            raise _timed_out(ctx, agent.name) from exc
        except AnswerTooLarge as exc:
            raise garbage(agent.name, f"its answer is over {self.max_answer_bytes} bytes") from exc
        except (OSError, UpstreamClosed) as exc:
            raise unavailable(agent.name, type(exc).__name__) from exc
        return await self._answer(ctx, call, answer.status, answer.headers, answer.body, began)

    async def _stream(
        self,
        ctx: RequestContext,
        call: A2aCall,
        principal: Principal,
        target: str,
        headers: dict[str, str],
        left_s: float,
    ) -> Response:
        """A streaming method: the agent's event stream relayed as it comes (`_relay`), or its
        answer as any other when it does not stream (an error)."""
        agent = call.agent
        upstream = agent.http.build_request(
            call.verb, agent.url + target, content=call.body or None, headers=headers,
            timeout=left_s,
        )  # fmt: skip
        try:
            answer = await agent.http.send(upstream, stream=True)
        except httpx.TimeoutException as exc:
            raise _timed_out(ctx, agent.name) from exc
        except httpx.HTTPError as exc:
            raise unavailable(agent.name, type(exc).__name__) from exc
        streamed = answer.headers.get("content-type", "").startswith(_STREAM_TYPE)
        if streamed and answer.status_code == 200:
            return StreamingResponse(
                self._relay(ctx, call, principal, answer),
                media_type=_STREAM_TYPE,
                headers={"Cache-Control": "no-store"},
            )
        try:
            raw = await _read_capped(answer, self.max_answer_bytes, agent.name)
        except httpx.TimeoutException as exc:
            raise _timed_out(ctx, agent.name) from exc
        except httpx.HTTPError as exc:
            raise unavailable(agent.name, type(exc).__name__) from exc
        finally:
            await answer.aclose()
        return await self._answer(ctx, call, answer.status_code, answer.headers, raw)

    async def _answer(
        self,
        ctx: RequestContext,
        call: A2aCall,
        status: int,
        headers: Mapping[str, str],
        raw: bytes,
        began: float | None = None,  # when a SendMessage waited for went out
    ) -> Response:
        name = call.agent.name
        try:
            document = json.loads(raw) if raw else None
        except ValueError as exc:
            raise garbage(name, f"HTTP {status}, not JSON") from exc
        if call.binding == JSONRPC and not isinstance(document, dict):
            raise garbage(name, "not a JSON-RPC response")
        if status < 400 and isinstance(document, dict):
            result = document.get("result") if call.binding == JSONRPC else document
            if began is not None and _work_done(result):
                _learn(ctx, began, censored=False)
            changed = await self._checked(ctx, call, result)
            if changed is not None:
                raw = json.dumps(
                    {**document, "result": changed} if call.binding == JSONRPC else changed
                ).encode()
        media = headers.get("content-type", "application/json")
        return Response(raw, status_code=status, media_type=media)

    async def _checked(self, ctx: RequestContext, call: A2aCall, result: Any) -> Any:
        """Bind a task the answer creates to the caller; the caller's own of a task list.
        Returns a changed result (None: as it came)."""
        name, method = call.agent.name, call.request.method
        principal = ctx.require_principal()
        if method in ("SendMessage", "CancelTask", "GetTask"):
            await self._claim(name, task_id_of(result), principal)
            if method == "SendMessage":
                await self._adopt(ctx, name, task_id_of(result))
        elif method == "ListTasks" and isinstance(result, dict):
            tasks = result.get("tasks")
            if isinstance(tasks, list):
                ids = [t.get("id") if isinstance(t, dict) else None for t in tasks]
                held = await self.owners.held_of(name, [i or "" for i in ids], principal)
                mine = [t for t, h in zip(tasks, held, strict=True) if h]
                return {**result, "tasks": mine, "totalSize": len(mine)}
        return None

    async def _adopt(self, ctx: RequestContext, agent: str, task_id: str | None) -> None:
        """A task created for a hosted task (the request's chain names one) ends with it."""
        if task_id is not None and ctx.chain.tasks:
            await self.children.adopt(ctx.chain.tasks[-1], task_ref(agent, task_id))

    async def _claim(self, agent: str, task_id: str | None, principal: Principal) -> None:
        if task_id is not None and not await self.owners.claim(agent, task_id, principal):
            raise garbage(agent, f"it answered with task {task_id[:64]!r}, not the caller's")

    async def _relay(
        self, ctx: RequestContext, call: A2aCall, principal: Principal, answer: httpx.Response
    ) -> AsyncIterator[bytes]:
        """The agent's event stream, event by event, until it ends or the deadline passes;
        the first event naming a task binds it to the caller."""
        bound = call.request.method != "SendStreamingMessage"
        # Each read waits at most the time left when the stream opened (the request's
        # timeout), and no event is passed on past it.
        ends = time.monotonic() + _time_left_s(_agent_deadline(ctx), call.agent.config.timeout_s)
        event: list[str] = []
        try:
            async for line in answer.aiter_lines():
                if time.monotonic() > ends:
                    return
                if line:
                    event.append(line)
                    continue
                if not bound and (task_id := _event_task(event, call.binding)) is not None:
                    await self._claim(call.agent.name, task_id, principal)
                    await self._adopt(ctx, call.agent.name, task_id)
                    bound = True
                yield ("\n".join(event) + "\n\n").encode()
                event = []
        except (httpx.HTTPError, GatewayError):
            return  # the agent went away, or answered another's task: the stream ends here
        finally:
            await answer.aclose()


def _learn(ctx: RequestContext, began: float, *, censored: bool) -> None:
    """A delegation's time for its window (`ctx.delegated`'s), learnt by the account stage."""
    if ctx.delegated is not None:
        ctx.delegation_sample = LatencySample((time.monotonic() - began) * 1000, censored)


def _work_done(result: Any) -> bool:
    """The agent answered with its work done or waiting on the caller (a message, or a task
    ended or interrupted), not a task it has only started: only such an answer times it."""
    if not isinstance(result, dict):
        return False
    if isinstance(result.get("message"), dict):
        return True
    task = result.get("task")
    status = task.get("status") if isinstance(task, dict) else None
    return isinstance(status, dict) and status.get("state") in ENDED | INTERRUPTED


def _event_task(event: list[str], binding: str) -> str | None:
    data = "\n".join(line[5:].lstrip() for line in event if line.startswith("data:"))
    try:
        document = json.loads(data)
    except ValueError:
        return None
    if binding == JSONRPC:
        document = document.get("result") if isinstance(document, dict) else None
    return task_id_of(document)


async def _check_push_url(url: str) -> None:
    """A push-notification URL must reach a public address: the agent would POST the task's
    updates there, from inside whatever network it runs in (refused as egress is)."""
    parts = urlsplit(url)
    try:
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise EgressRefused(f"{url[:128]!r} is not an http(s) URL")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
        await public_addresses(f"{host}:{port}")
    except (EgressRefused, ValueError) as exc:
        raise GatewayError.of(
            ErrorCode.INVALID_ARGUMENTS,
            f"the push-notification URL is refused: {exc}",
            param_hints={"url": "a public http(s) URL the agent may send updates to"},
        ) from exc


def _agent_deadline(ctx: RequestContext) -> int | None:
    return onward_deadline_ms(ctx.time_ask, ctx.granted_ms, ctx.kill_margin_ms)


def _headers(ctx: RequestContext, principal: Principal, deadline: int | None) -> dict[str, str]:
    headers = {k: v for k in _PASSED_ON if (v := ctx.headers.get(k))}
    headers["x-conclave-tenant"] = principal.tenant
    headers["x-conclave-agent"] = principal.agent
    if principal.obo:
        headers["x-conclave-on-behalf-of"] = principal.obo
    if ctx.traceparent:
        headers["traceparent"] = ctx.traceparent
    if ctx.a2a_onward:  # the agent passes it on with what it delegates for this request
        headers[CHAIN_HEADER.lower()] = ctx.a2a_onward
    if deadline is not None:
        headers["x-conclave-deadline"] = str(deadline)
    return headers


def _time_left_s(deadline: int | None, timeout_s: float) -> float:
    if deadline is None:
        return timeout_s
    return max(0.001, min(timeout_s, (deadline - time.time() * 1000) / 1000))


def _timed_out(ctx: RequestContext, name: str) -> GatewayError:
    if ctx.time_ask.deadline_ms is not None:
        return GatewayError.of(
            ErrorCode.DEADLINE_EXCEEDED,
            f"A2A agent {name!r} had not answered by the deadline it was given (its share of"
            " the run's)",
        )
    return GatewayError.of(
        ErrorCode.TOOL_TIMEOUT, f"A2A agent {name!r} did not answer within its timeout_s"
    )


async def _read_capped(answer: httpx.Response, cap: int, name: str) -> bytes:
    parts: list[bytes] = []
    size = 0
    async for chunk in answer.aiter_bytes():
        size += len(chunk)
        if size > cap:
            raise garbage(name, f"its answer is over {cap} bytes")
        parts.append(chunk)
    return b"".join(parts)
