"""`TaskRunner`: runs the tool calls that became MCP tasks, in one task group of its own.

A task's call runs through the same pipeline as any call (identity, policy, budget, audit);
the request that asked for it is answered as soon as every check passed and the task's
record is in Redis (`start`), and the call goes on in the runner's task group, not the
request's. A call refused before it runs (a bad token, a tool outside the scopes, a rate
limit) is answered as it always is: it never becomes a task.

A call whose server asks the client something waits in the task (`input_required`) for the
client's `tasks/update`; one whose server asks in rounds itself is run again with the answers
(`task_rounds`); one an `approve` policy rule holds is a task before it waits, and shows
`input_required` (its statusMessage names the approval) until a person decides. While
the call runs, its replica renews the task's lease (every third of
`lease_ms`). Its end, whatever it is (the result, a tool error, the budget's
DEADLINE_EXCEEDED, a cancel), is written once as the task's outcome, as the call would have
answered it (`outcome_of`).

A replica that dies takes its calls with it: the sandbox's runner is driven over the
replica's own channel, so the call stops with its host. What survives is the record, and
the lease lapses: the next `tasks/get`, on any replica, takes the task over (`resume`). An
idempotent tool's call is run again from the record, as its owner (the poller's credential,
checked again, so a revoked agent's task is not run) and by the first call's deadline; any
other call's task ends with the tool error SANDBOX_KILLED (what the call would have
answered had its sandbox been killed under it), since running it twice could do its effects
twice.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.abc import TaskGroup, TaskStatus

from gateway.cancellation import CallCancel
from gateway.mcp_tasks.task_record import TaskCall, TaskRecord
from gateway.mcp_tasks.task_record import TaskStatus as Status
from gateway.mcp_tasks.task_rounds import MAX_ROUNDS, answered
from gateway.mcp_tasks.task_store import TaskStore
from gateway.pipeline import Pipeline, RequestContext
from protocol import DEADLINE_HEADER, ApprovalRecord, ErrorCode, InputRound, SerfError

log = logging.getLogger("conclave.gateway.mcp_tasks")

TASK_REQUEST_PREFIX = "task:"  # a task's call is named `task:<id>` among its caller's calls
_KEPT_HEADERS = ("authorization", "traceparent")  # what a resumed call takes from its poller


@dataclass(frozen=True)
class TaskOutcome:
    """How a task ended: its terminal status, the JSON-RPC result or error, a message."""

    status: Status
    outcome: dict[str, Any] | None
    message: str = ""


OutcomeOf = Callable[[RequestContext], TaskOutcome]
_Hook = Callable[[RequestContext], Awaitable[None]]


def task_request_id(task_id: str) -> str:
    """The request id a task's call runs under: what `tasks/cancel` names to InflightCalls."""
    return TASK_REQUEST_PREFIX + task_id


class TaskRunner:
    def __init__(self, store: TaskStore, pipeline: Pipeline, outcome_of: OutcomeOf) -> None:
        self.store = store
        self.pipeline = pipeline
        self.outcome_of = outcome_of
        self._group: TaskGroup | None = None

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Hold the task group the calls run in, until cancelled (the gateway stops)."""
        async with anyio.create_task_group() as group:
            self._group = group
            task_status.started()
            try:
                await anyio.sleep_forever()
            finally:
                self._group = None

    async def start(self, ctx: RequestContext, task_id: str) -> TaskRecord | None:
        """Run `ctx`'s call as the task `task_id`: its record once the call is admitted, or
        None when the pipeline refused it first (`ctx` then holds the refusal)."""
        created: list[TaskRecord] = []

        async def create(admitted: RequestContext) -> None:
            assert admitted.tool is not None and admitted.tool_context is not None
            deadline = admitted.tool_context.deadline_ms
            if admitted.granted_ms is not None:  # the budget's grant ends the call first
                by_grant = int(time.time() * 1000) + admitted.granted_ms
                deadline = by_grant if deadline is None else min(deadline, by_grant)
            call = TaskCall(
                admitted.tool.name, admitted.arguments, deadline, admitted.tool.spec.idempotent
            )
            record = await self.store.create(admitted.require_principal(), task_id, call)
            created.append(record)

        decided = anyio.Event()
        self._prepare(ctx, task_id, create)
        self._task_group().start_soon(self._drive, ctx, task_id, decided, False)
        await decided.wait()
        return created[0] if created else None

    async def resume(self, record: TaskRecord, headers: Mapping[str, str]) -> None:
        """Take over `record`, whose replica is gone, for the poller whose `headers` asked
        (its owner: the store gives a task to no one else). Returns once settled: the call
        run again in the background, or the task failed; nothing when another replica took
        it first."""
        if not await self.store.take_over(record.tenant, record.task_id):
            return
        kept = {name: headers[name] for name in _KEPT_HEADERS if name in headers}
        if not record.call.idempotent:
            # Answered as the call would have been had its sandbox been killed under it.
            lost = RequestContext("mcp", record.call.tool, kept)
            lost.error = SerfError.of(
                ErrorCode.SANDBOX_KILLED,
                f"the gateway replica running this task of {record.call.tool!r} stopped, and"
                " its sandbox's call with it; the tool is not declared idempotent, so it was"
                " not run again: call it again if its effects allow",
                trace_id=lost.trace_id,
            )
            lost.failed_stage = "dispatch"
            ended = self.outcome_of(lost)
            await self.store.finish(
                record.tenant, record.task_id, ended.status, ended.outcome, ended.message
            )
            return
        if record.call.deadline_ms is not None:  # the first call's deadline, not a new one
            kept[DEADLINE_HEADER.lower()] = str(record.call.deadline_ms)
        ctx = RequestContext("mcp", record.call.tool, kept)
        ctx.tool_name, ctx.arguments = record.call.tool, dict(record.call.arguments)

        async def admitted(_: RequestContext) -> None:
            # A cancel sent while the call was being taken over found no call to stop.
            reason = await self.store.cancel_asked(record.tenant, record.task_id)
            if reason is not None and ctx.cancel is not None:
                ctx.cancel.cancel(reason)

        decided = anyio.Event()
        self._prepare(ctx, record.task_id, admitted)
        self._task_group().start_soon(
            self._drive, ctx, record.task_id, decided, True, record.tenant
        )
        await decided.wait()

    def _prepare(self, ctx: RequestContext, task_id: str, admitted: _Hook) -> None:
        # Nobody listens to a task's progress on a request that has ended: its events, if
        # any, are the questions its server asks the client, kept in the task (task_methods).
        ctx.cancel, ctx.request_id = CallCancel(), task_request_id(task_id)
        ctx.on_admitted = admitted

        async def held(approval: ApprovalRecord | None) -> None:
            why = None
            if approval is not None:
                reason = f": {approval.reason}" if approval.reason else ""
                why = f"waiting for approval {approval.id} (policy {approval.policy!r}{reason})"
            await self.store.held(ctx.require_principal().tenant, task_id, why)

        ctx.on_held = held

    def _task_group(self) -> TaskGroup:
        if self._group is None:
            raise RuntimeError("the task runner is not running (the gateway is not serving)")
        return self._group

    async def _drive(
        self,
        ctx: RequestContext,
        task_id: str,
        decided: anyio.Event,
        resumed: bool,
        tenant: str | None = None,
    ) -> None:
        """Run the call, keep its lease while it runs, and write how it ended. A call
        `resumed` from its record ends its task even when refused before it ran (a passed
        deadline, a revoked agent): it is not run again at the next poll. Its lease, taken
        over for `tenant`, is renewed from the start, before the call is authenticated."""
        admitted = anyio.Event()
        if resumed:
            admitted.set()
        run_hook = ctx.on_admitted
        assert run_hook is not None

        async def on_admitted(c: RequestContext) -> None:
            await run_hook(c)
            admitted.set()
            decided.set()  # the request is answered: the task exists

        ctx.on_admitted = on_admitted
        try:
            async with anyio.create_task_group() as beating:
                beating.start_soon(self._keep_lease, ctx, task_id, admitted, tenant)
                await self.pipeline.run(ctx)
                for _ in range(MAX_ROUNDS):  # its server asks in rounds itself (task_rounds)
                    if not isinstance(ctx.result, InputRound) or ctx.events is None:
                        break
                    ctx = await answered(ctx, ctx.result)
                    await self.pipeline.run(ctx)
                beating.cancel_scope.cancel()
        except anyio.get_cancelled_exc_class():
            # The gateway is stopping: leave the task to another replica, at once.
            with anyio.CancelScope(shield=True):
                if admitted.is_set() and ctx.principal is not None:
                    await self.store.release(ctx.principal.tenant, task_id)
            raise
        finally:
            decided.set()  # refused before it ran: the request answers the refusal
        if not admitted.is_set() or ctx.principal is None:
            return  # never a task (or refused before its caller was known: lease lapses)
        ended = self.outcome_of(ctx)
        try:
            await self.store.finish(
                ctx.principal.tenant, task_id, ended.status, ended.outcome, ended.message
            )
        except Exception:  # the store is gone: the lease lapses, and a poll takes it over
            log.exception("task %s ended, but its outcome could not be written", task_id)

    async def _keep_lease(
        self, ctx: RequestContext, task_id: str, admitted: anyio.Event, tenant: str | None
    ) -> None:
        await admitted.wait()
        every_s = self.store.lease_ms / 3000
        while True:
            await anyio.sleep(every_s)
            # A resumed call's lease was taken for its record's tenant: renewed while the
            # call is still being admitted (under load that outlasted the lease, and the
            # next poll ran the task a third time).
            owner = ctx.principal.tenant if ctx.principal is not None else tenant
            if owner is None:
                continue
            try:
                await self.store.renew(owner, task_id)
            except Exception as exc:  # a blip in Redis: the next renewal may make it
                log.warning("task %s: lease not renewed (%s)", task_id, exc)


__all__ = ["TASK_REQUEST_PREFIX", "OutcomeOf", "TaskOutcome", "TaskRunner", "task_request_id"]
