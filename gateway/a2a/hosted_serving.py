"""`HostedA2a`: A2A 1.0 for a hosted agent, as the dispatch stage's action, and the sweep that
ends what its workers and callers left behind.

- SendMessage creates a task (queued for a worker) and waits, on the task's event stream,
  until it ends or is interrupted (input-required, auth-required), or the task's deadline
  (ATBA's share of the caller's: then the task is CANCELED, its status message carrying SERF
  DEADLINE_EXCEEDED), or the
  agent's `timeout_s`; with `configuration.returnImmediately` it answers at once. A message
  naming an interrupted task of the caller's resumes it (queued again with the message).
- SendStreamingMessage and SubscribeToTask answer the Task, then its events, from its Redis
  stream (any replica serves them), until it ends or is interrupted.
- A new task counts among its caller's tenant's live tasks until it ends: past
  `a2a_tenant_tasks_max` of them, SendMessage is RATE_LIMITED (`LiveTasks`).
- GetTask, ListTasks (the caller's own, filtered and paged: `hosted_listing`) and CancelTask
  (the worker learns it on its next write); another identity's task is TaskNotFoundError.
  Push-notification methods are PushNotificationNotSupportedError; the extended card
  UnsupportedOperationError.
- The sweep, on every replica: a task whose worker's lease ended goes back to the queue when
  the agent is idempotent, else FAILED (SERF UPSTREAM_UNAVAILABLE, naming the hop); a task
  past its caller's deadline is CANCELED (SERF DEADLINE_EXCEEDED).
- Cascades: a task is created with the delegation chain its worker sends on, naming it, and
  is recorded as a child of the task it was delegated for, if any. Whenever a task ends
  (cancelled, past its deadline, failed, or answered by its worker), what runs under it is
  cancelled on every replica (`TaskCascade`: its worker's tool calls and delegations), and its
  children are CANCELED (SERF CANCELLED, naming the hop), theirs in turn; a child at a remote
  agent is sent CancelTask. A caller that goes
  away from a SendMessage waiting on the task it created (its connection closed, or the task
  it works for ended) cancels that task the same way.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs

import anyio
from anyio.abc import TaskStatus
from redis.exceptions import RedisError
from starlette.responses import JSONResponse, Response, StreamingResponse

from gateway.a2a.a2a_errors import (
    PUSH_NOT_SUPPORTED,
    TASK_NOT_CANCELABLE,
    UNSUPPORTED_OPERATION,
    a2a_failure,
    task_not_found,
)
from gateway.a2a.a2a_methods import PUSH_METHODS, A2aRequest, check_version
from gateway.a2a.forwarding import A2aForwarder
from gateway.a2a.hosted_agents import HostedAgent, HostedAgents
from gateway.a2a.hosted_listing import list_tasks
from gateway.a2a.hosted_tasks import (
    ENDED,
    INTERRUPTED,
    HostedTasks,
    new_task_id,
    now_ms,
    status_json,
    task_ref,
)
from gateway.a2a.hosted_work import post_update
from gateway.a2a.live_tasks import LiveTasks
from gateway.a2a.remote_agents import JSONRPC, RemoteAgent, RemoteAgents
from gateway.budgets import LatencySample
from gateway.delegation import ChainSigner, TaskCascade, onward_deadline_ms
from gateway.gateway_error import GatewayError
from gateway.pipeline import RequestContext
from protocol import (
    A2A_VERSION_HEADER,
    A2aWorkAck,
    A2aWorkUpdate,
    ErrorCode,
    Principal,
    SerfError,
)

log = logging.getLogger("conclave.gateway.a2a")
SWEEP_INTERVAL_S = 0.25


class HostedA2a:
    def __init__(
        self,
        tasks: HostedTasks,
        agents: HostedAgents,
        chains: ChainSigner,
        cascade: TaskCascade,
        live: LiveTasks,
        remote_agents: RemoteAgents,
        forwarder: A2aForwarder,
    ) -> None:
        self.tasks = tasks
        self.agents = agents
        self.chains = chains
        self.cascade = cascade
        self.live = live  # each tenant's live tasks, bounded
        self.remote_agents = remote_agents  # a child task at one of them is cancelled there
        self.forwarder = forwarder

    async def serve(
        self,
        ctx: RequestContext,
        agent: HostedAgent,
        request: A2aRequest,
        binding: str,
        body: bytes,
        query: str,
        rpc_id: Any,
    ) -> Response:
        principal = ctx.require_principal()
        method = request.method
        check_version(ctx.headers.get(A2A_VERSION_HEADER.lower()))
        document = json.loads(body) if body.strip() else {}
        params = document.get("params") if binding == JSONRPC else document
        params = params if isinstance(params, dict) else {}
        if binding != JSONRPC:
            params = {**{k: v[-1] for k, v in parse_qs(query).items()}, **params}
            if request.task_id is not None:
                params["id"] = request.task_id
        answer = _Answer(binding, rpc_id)
        if method in PUSH_METHODS:
            raise a2a_failure(
                PUSH_NOT_SUPPORTED,
                ErrorCode.METHOD_NOT_FOUND,
                f"A2A agent {agent.name!r} sends no push notifications (its card says so):"
                " poll GetTask or subscribe instead",
            )
        if method in ("SendMessage", "SendStreamingMessage"):
            return await self._send(ctx, agent, principal, params, answer, request)
        if method == "GetTask":
            history = _int(params.get("historyLength", params.get("history_length")))
            return answer.one(await self._own(agent, principal, request.task_id, history))
        if method == "ListTasks":
            return answer.one(await list_tasks(self.tasks, agent.name, principal, params))
        if method == "CancelTask":
            return answer.one(await self._cancel(agent, principal, request.task_id))
        if method == "SubscribeToTask":
            return await self._subscribe(agent, principal, request.task_id, answer)
        raise a2a_failure(
            UNSUPPORTED_OPERATION,
            ErrorCode.METHOD_NOT_FOUND,
            f"A2A agent {agent.name!r} has no extended card: its public card is all there is",
        )

    async def _own(
        self, agent: HostedAgent, principal: Principal, task_id: str | None, history: int | None
    ) -> dict[str, Any]:
        task = None
        if task_id is not None:
            task = await self.tasks.task(agent.name, task_id, principal, history)
        if task is None:
            raise task_not_found(agent.name, task_id or "")
        return task

    async def _send(
        self,
        ctx: RequestContext,
        agent: HostedAgent,
        principal: Principal,
        params: dict[str, Any],
        answer: _Answer,
        request: A2aRequest,
    ) -> Response:
        message = params.get("message")
        if not isinstance(message, dict) or not isinstance(message.get("parts"), list):
            raise GatewayError.of(
                ErrorCode.INVALID_ARGUMENTS,
                "SendMessage needs a message with parts",
                param_hints={"message": "a Message: messageId, role, parts"},
            )
        # The task's deadline: ATBA's share of the caller's, which its worker's calls draw from.
        deadline = onward_deadline_ms(ctx.time_ask, ctx.granted_ms, ctx.kill_margin_ms)
        task_id = request.task_id  # read in each spelling the parse accepts, all agreeing
        if task_id is not None:
            await self._own(agent, principal, task_id, 0)
            resumed = await self.tasks.requeue(agent.name, task_id, message)
            if resumed != "OK":
                raise a2a_failure(
                    UNSUPPORTED_OPERATION,
                    ErrorCode.INVALID_REQUEST,
                    f"task {task_id[:64]!r} is {resumed}, not waiting for input: a message"
                    " continues only a task that asked for input",
                )
        else:
            task_id = new_task_id()
            ref = task_ref(agent.name, task_id)
            timeout_ms = int(agent.config.timeout_s * 1000)
            await self.live.admit(principal.tenant, ref, deadline or now_ms() + timeout_ms)
            chain = self.chains.onward(ctx.chain, agent.name, principal, task=ref)
            await self.tasks.create(agent.name, principal, message, deadline, chain, task_id)
            if ctx.chain.tasks:  # delegated for another hosted task: it ends with that one
                await self.tasks.adopt(ctx.chain.tasks[-1], ref)
        found = await self.tasks.snapshot_for_stream(agent.name, task_id, principal)
        assert found is not None  # created (or checked) just now, by this caller
        task, last = found
        if request.method == "SendStreamingMessage":
            return answer.stream(self._task_then_events(agent, task, last))
        configuration = params.get("configuration")
        if isinstance(configuration, dict) and configuration.get("returnImmediately") is True:
            return answer.one({"task": task})
        ends = time.monotonic() + agent.config.timeout_s
        by_deadline = False  # the wait ends at the caller's deadline, before the agent's timeout
        if deadline is not None:
            at_deadline = time.monotonic() + (deadline - now_ms()) / 1000
            by_deadline, ends = at_deadline <= ends, min(ends, at_deadline)
        cut = False  # the wait was cut by its time, not ended by the task
        if task["status"]["state"] not in ENDED | INTERRUPTED:
            began = time.monotonic()
            try:
                with anyio.move_on_after(max(0.0, ends - time.monotonic())) as waiting:
                    async for _event in self.tasks.events(agent.name, task_id, last):
                        pass
            except anyio.get_cancelled_exc_class():
                reason = ctx.cancel.reason if ctx.cancel is not None else None
                with anyio.CancelScope(shield=True):  # nobody waits for it any more
                    await self._end_under(agent.name, task_id, reason or "the caller went away")
                raise
            cut = waiting.cancelled_caught
            if ctx.delegated is not None:  # its time, for its window (censored: cut there)
                ctx.delegation_sample = LatencySample((time.monotonic() - began) * 1000, cut)
        # Past the deadline by the wait's own timer too: the loop's timers may fire a
        # millisecond or more before the wall clock reads the deadline (libuv's cached time).
        if deadline is not None and ((cut and by_deadline) or now_ms() >= deadline):
            await self._past_deadline(agent, task_id)
        result = await self.tasks.result(agent.name, task_id, principal)
        if result is None:
            raise task_not_found(agent.name, task_id)
        return answer.one(result)

    async def _cancel(
        self, agent: HostedAgent, principal: Principal, task_id: str | None
    ) -> dict[str, Any]:
        task = await self._own(agent, principal, task_id, 0)
        status = status_json("TASK_STATE_CANCELED", task["id"], task["contextId"])
        verdict, state = await self.tasks.end(agent.name, task["id"], "TASK_STATE_CANCELED", status)
        if verdict == "ENDED":
            raise a2a_failure(
                TASK_NOT_CANCELABLE,
                ErrorCode.INVALID_REQUEST,
                f"task {task['id']!r} has ended ({state}): there is nothing to cancel",
            )
        await self.ended(task_ref(agent.name, task["id"]), "its caller cancelled it")
        return await self._own(agent, principal, task["id"], None)

    async def update(self, agent: HostedAgent, task_id: str, update: A2aWorkUpdate) -> A2aWorkAck:
        """A worker's update (`post_update`); one that ends the task ends what runs under it."""
        ack = await post_update(self.tasks, agent, task_id, update)
        if update.state in ENDED and not ack.cancelled:
            await self.ended(task_ref(agent.name, task_id), f"it ended ({update.state})")
        return ack

    async def ended(self, ref: str, why: str) -> None:
        """Task `ref` ended (`why`): cancel what runs under it on every replica, and cancel
        the tasks delegated for it, and theirs (a chain is at most `A2A_MAX_CHAIN` deep)."""
        reason = f"task {ref} was delegated for ended: {why}"
        owner = await self.tasks.owner(ref)
        if owner is not None:
            await self.live.release(owner.partition("/")[0], ref)
        # The hosted tasks under it end CANCELED before what runs under them is stopped: a
        # worker whose call is stopped first answers its task FAILED before the cascade
        # reaches it (CI saw C's task FAILED). A remote agent's is asked once all is stopped.
        remote: list[tuple[RemoteAgent, str]] = []
        for child in await self.tasks.children(ref):
            agent, _, task_id = child.partition("/")
            if (remote_agent := self.remote_agents.get(agent)) is not None:
                remote.append((remote_agent, task_id))
            else:
                await self._end_under(agent, task_id, reason)
        await self.cascade.ended([ref], reason)
        for remote_agent, task_id in remote:
            await self.forwarder.cancel_task(remote_agent, task_id, reason)

    async def _end_under(self, agent: str, task_id: str, reason: str) -> None:
        """End hosted task `task_id` of `agent` CANCELED because what it was done for ended
        (`reason`), and what was delegated for it in turn."""
        task = await self.tasks.task(agent, task_id, None, 0)
        if task is None:
            return
        serf = SerfError.of(
            ErrorCode.CANCELLED,
            f"A2A agent {agent!r}'s task was cancelled: {reason}",
            details={"hop": agent, "reason": reason},
        )
        status = status_json("TASK_STATE_CANCELED", task_id, task["contextId"], serf=serf)
        verdict, _ = await self.tasks.end(agent, task_id, "TASK_STATE_CANCELED", status)
        if verdict == "OK":
            await self.ended(task_ref(agent, task_id), reason)

    async def _subscribe(
        self, agent: HostedAgent, principal: Principal, task_id: str | None, answer: _Answer
    ) -> Response:
        found = None
        if task_id is not None:
            found = await self.tasks.snapshot_for_stream(agent.name, task_id, principal)
        if found is None:
            raise task_not_found(agent.name, task_id or "")
        task, last = found
        if task["status"]["state"] in ENDED:
            raise a2a_failure(
                UNSUPPORTED_OPERATION,
                ErrorCode.INVALID_REQUEST,
                f"task {task['id']!r} has ended ({task['status']['state']}): GetTask reads it",
            )
        # A subscriber watches the task to its end: an interruption (input-required) is an
        # event it sees, and the caller's next message resumes the task under its eyes.
        return answer.stream(self._task_then_events(agent, task, last, until=ENDED))

    async def _task_then_events(
        self,
        agent: HostedAgent,
        task: dict[str, Any],
        last: str,
        until: frozenset[str] = ENDED | INTERRUPTED,
    ) -> AsyncIterator[dict[str, Any]]:
        yield {"task": task}
        if task["status"]["state"] in until:
            return
        async for event in self.tasks.events(agent.name, task["id"], last, until):
            yield event

    async def _past_deadline(self, agent: HostedAgent, task_id: str) -> None:
        task = await self.tasks.task(agent.name, task_id, None, 0)
        if task is None:
            return
        serf = SerfError.of(
            ErrorCode.DEADLINE_EXCEEDED,
            f"the caller's deadline passed before A2A agent {agent.name!r} finished the task",
            details={"hop": agent.name},
        )
        status = status_json("TASK_STATE_CANCELED", task_id, task["contextId"], serf=serf)
        verdict, _ = await self.tasks.end(agent.name, task_id, "TASK_STATE_CANCELED", status)
        if verdict == "OK":
            await self.ended(task_ref(agent.name, task_id), "the caller's deadline passed")

    async def _lapsed(self, agent: HostedAgent, task_id: str) -> None:
        if agent.config.idempotent:
            await self.tasks.requeue(agent.name, task_id, None)
            return
        task = await self.tasks.task(agent.name, task_id, None, 0)
        if task is None:
            return
        serf = SerfError.of(
            ErrorCode.UPSTREAM_UNAVAILABLE,
            f"the worker serving A2A agent {agent.name!r} stopped writing for its lease"
            f" ({agent.config.lease_s:g} s) and the agent is not idempotent, so the task was"
            " not run again: send it again if that is safe",
            details={"hop": agent.name, "reason": "lease_lapsed"},
        )
        status = status_json("TASK_STATE_FAILED", task_id, task["contextId"], serf=serf)
        verdict, _ = await self.tasks.end(
            agent.name, task_id, "TASK_STATE_FAILED", status, lapsed_by=now_ms()
        )
        if verdict == "OK":
            await self.ended(task_ref(agent.name, task_id), "its worker stopped writing")

    async def sweep(self) -> None:
        """Once over every hosted agent: lapsed leases and passed deadlines."""
        for agent in self.agents:
            lapsed, late = await self.tasks.due(agent.name)
            for task_id in lapsed:
                await self._lapsed(agent, task_id)
            for task_id in late:
                await self._past_deadline(agent, task_id)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """The sweep every SWEEP_INTERVAL_S, for as long as the gateway runs (every replica
        runs it: each step is one script, so two replicas sweeping change a task once)."""
        task_status.started()
        if not self.agents.names:
            return
        while True:
            try:
                await self.sweep()
            except (RedisError, OSError) as exc:  # Redis away: the next round tries again
                log.warning("hosted A2A sweep failed: %s", exc)
            await anyio.sleep(SWEEP_INTERVAL_S)


class _Answer:
    """A result as the binding answers it: JSON-RPC's envelope, or HTTP+JSON's body."""

    def __init__(self, binding: str, rpc_id: Any) -> None:
        self.binding = binding
        self.rpc_id = rpc_id

    def _wrap(self, result: Any) -> Any:
        if self.binding == JSONRPC:
            return {"jsonrpc": "2.0", "id": self.rpc_id, "result": result}
        return result

    def one(self, result: Any) -> Response:
        return JSONResponse(self._wrap(result))

    def stream(self, events: AsyncIterator[dict[str, Any]]) -> Response:
        async def sse() -> AsyncIterator[bytes]:
            async for event in events:
                yield b"data: " + json.dumps(self._wrap(event)).encode() + b"\n\n"

        return StreamingResponse(
            sse(), media_type="text/event-stream", headers={"Cache-Control": "no-store"}
        )


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None
