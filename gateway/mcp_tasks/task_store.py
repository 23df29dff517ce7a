"""`TaskStore`: MCP tasks in Redis, where every replica finds them.

Key layout (the tenant's hash tag, as the state's keys: one slot per tenant on a cluster, so
the scripts can charge the tenant's usage in the same step):

- ``cc:{t:<tenant>}:task:<id>``        hash: agent (the owner), status, message, created,
  updated (unix ms), ttl, poll (ms), call (JSON `TaskCall`), attempts, outcome (JSON, once
  ended), cancel (why its owner cancelled it, once it did). It expires `ttl` ms after its
  creation, its result with it.
- ``cc:{t:<tenant>}:task:<id>:lease``  string: the replica running the call, expiring
  `lease_ms` after its last renewal. Absent while the task works: its replica is gone.
- ``cc:{t:<tenant>}:task:<id>:input``  hash: the questions the call's server asks the client
  and the client has not answered yet (input id -> `{"method", "params"}` JSON), while the
  task is `input_required`; it expires with the task.

The record's bytes are charged to the tenant's usage as an expiring record (the ledger of
`gateway.state.keys`), so tasks count against the tenant's byte quota (a task that would go
over it is refused, STATE_QUOTA_EXCEEDED) and leave it when they expire. The owner is the
authenticated principal that created the task: a task of another agent, or of another
tenant (another key), reads as unknown, so a task id is of no use to anyone but its owner.
"""

from __future__ import annotations

import json
import time
from typing import Any

from redis.asyncio import Redis

from gateway.mcp_tasks.task_record import TASK_ID_PATTERN, TaskCall, TaskRecord, TaskStatus
from gateway.redis_io import LuaScript, lua_library, lua_script
from gateway.state import task_over_quota
from protocol import Principal


def task_key(tenant: str, task_id: str) -> str:
    return f"cc:{{t:{tenant}}}:task:{task_id}"


# Each script's text and its declared arguments: callers lay out KEYS and ARGV by name.
CREATE = lua_script("gateway.mcp_tasks", "task_create")
FINISH = lua_script("gateway.mcp_tasks", "task_finish")
ASK_CANCEL = lua_script("gateway.mcp_tasks", "task_ask_cancel")
ASK_INPUT = lua_script("gateway.mcp_tasks", "task_ask_input")
INPUT_ANSWERED = lua_script("gateway.mcp_tasks", "task_input_answered")
HELD = lua_script("gateway.mcp_tasks", "task_held")


def _charging(script: LuaScript) -> str:
    """`script`'s text after the state's functions charging a tenant's usage."""
    return lua_library("gateway.state", "tenant_bytes") + "\n" + script.text


def _ledger(tenant: str) -> str:
    """The prefix of the tenant's usage ledger's keys (`usage`, `expiring`, `expiring_bytes`)."""
    return f"cc:{{t:{tenant}}}:"


def _now_ms() -> int:
    return int(time.time() * 1000)


class TaskStore:
    def __init__(
        self,
        redis: Redis,
        *,
        replica: str,
        ttl_ms: int,
        poll_ms: int,
        lease_ms: int,
        quota_bytes: int,
    ) -> None:
        self.redis = redis
        self.quota_bytes = quota_bytes  # the tenant's state byte quota, tasks included
        self.replica = replica  # what a lease says: the replica running the call
        self.ttl_ms, self.poll_ms, self.lease_ms = ttl_ms, poll_ms, lease_ms
        self._create = redis.register_script(_charging(CREATE))
        self._finish = redis.register_script(_charging(FINISH))
        self._ask_cancel = redis.register_script(ASK_CANCEL.text)
        self._ask_input = redis.register_script(ASK_INPUT.text)
        self._input_answered = redis.register_script(INPUT_ANSWERED.text)
        self._held = redis.register_script(HELD.text)

    async def create(
        self, principal: Principal, task_id: str, call: TaskCall, message: str = ""
    ) -> TaskRecord:
        """Record a working task owned by `principal`, leased to this replica; once this
        returns, `tasks/get` finds it on every replica (the extension's "durably created").
        STATE_QUOTA_EXCEEDED when the record would take the tenant over its byte quota."""
        now = _now_ms()
        key, ledger = task_key(principal.tenant, task_id), _ledger(principal.tenant)
        answer = await self._create(
            keys=CREATE.keys(
                task_key=key,
                lease_key=f"{key}:lease",
                usage_key=f"{ledger}usage",
                expiring_key=f"{ledger}expiring",
                sizes_key=f"{ledger}expiring_bytes",
            ),
            args=CREATE.argv(
                agent=principal.agent,
                call=json.dumps(call.as_json()),
                now_ms=now,
                ttl_ms=self.ttl_ms,
                poll_ms=self.poll_ms,
                replica=self.replica,
                lease_ms=self.lease_ms,
                message=message,
                quota_bytes=self.quota_bytes,
            ),
        )
        if answer[0] == "QUOTA":
            used, added = int(answer[1]), int(answer[2])
            raise task_over_quota(principal.tenant, used, added, self.quota_bytes)
        return TaskRecord(
            task_id, principal.tenant, principal.agent, "working", message, now, now,
            self.ttl_ms, self.poll_ms, call,
        )  # fmt: skip

    async def get(self, principal: Principal, task_id: str) -> TaskRecord | None:
        """`principal`'s task `task_id`; None when there is none (unknown, expired, or
        another's: the same answer, so an id reveals nothing)."""
        if not TASK_ID_PATTERN.match(task_id):
            return None
        key = task_key(principal.tenant, task_id)
        # The task and its questions in one transaction: read apart, an answer landing
        # between them showed `input_required` with no question to answer.
        async with self.redis.pipeline(transaction=True) as both:
            both.hgetall(key)
            both.hgetall(f"{key}:input")
            raw, asked = await both.execute()
        if not raw or raw.get("agent") != principal.agent:
            return None
        inputs: dict[str, Any] = {}
        if raw.get("status") == "input_required":
            inputs = {input_id: json.loads(request) for input_id, request in asked.items()}
        return _record(principal.tenant, task_id, raw, inputs)

    async def ask_input(
        self, tenant: str, task_id: str, input_id: str, request: dict[str, Any]
    ) -> bool:
        """The call asks its client `request` under `input_id`: the task is `input_required`
        until it is answered (`input_answered`); False when the task has ended."""
        key = task_key(tenant, task_id)
        asked = await self._ask_input(
            keys=ASK_INPUT.keys(task_key=key, input_key=f"{key}:input"),
            args=ASK_INPUT.argv(input_id=input_id, request=json.dumps(request), now_ms=_now_ms()),
        )
        return bool(asked)

    async def input_answered(self, tenant: str, task_id: str, input_id: str) -> None:
        """The question `input_id` is no longer waiting (answered, or the call stopped)."""
        key = task_key(tenant, task_id)
        await self._input_answered(
            keys=INPUT_ANSWERED.keys(task_key=key, input_key=f"{key}:input"),
            args=INPUT_ANSWERED.argv(input_id=input_id, now_ms=_now_ms()),
        )

    async def finish(
        self, tenant: str, task_id: str, status: TaskStatus, outcome: Any, message: str = ""
    ) -> bool:
        """End the task with `status` (and its outcome); False when it had ended already."""
        key, ledger = task_key(tenant, task_id), _ledger(tenant)
        ended = await self._finish(
            keys=FINISH.keys(
                task_key=key,
                lease_key=f"{key}:lease",
                usage_key=f"{ledger}usage",
                expiring_key=f"{ledger}expiring",
                sizes_key=f"{ledger}expiring_bytes",
            ),
            args=FINISH.argv(
                status=status,
                outcome="" if outcome is None else json.dumps(outcome),
                message=message,
                now_ms=_now_ms(),
            ),
        )
        return bool(ended)

    async def held(self, tenant: str, task_id: str, message: str | None) -> None:
        """The task's call waits for a person's approval (`message` says which): the task is
        `input_required` with it as its statusMessage; None: released, `working` again."""
        await self._held(
            keys=HELD.keys(task_key=task_key(tenant, task_id)),
            args=HELD.argv(held="1" if message else "0", message=message or "", now_ms=_now_ms()),
        )

    async def ask_cancel(self, tenant: str, task_id: str, reason: str) -> None:
        """Record that the owner cancelled the task (`cancel_asked` reads it back)."""
        await self._ask_cancel(
            keys=ASK_CANCEL.keys(task_key=task_key(tenant, task_id)),
            args=ASK_CANCEL.argv(why=reason),
        )

    async def cancel_asked(self, tenant: str, task_id: str) -> str | None:
        """Why the owner cancelled the task, or None when it did not."""
        reason = await self.redis.hget(task_key(tenant, task_id), "cancel")
        return None if reason is None else str(reason)

    async def renew(self, tenant: str, task_id: str) -> None:
        """This replica still runs the task: its lease goes on."""
        key = task_key(tenant, task_id)
        await self.redis.set(f"{key}:lease", self.replica, px=self.lease_ms)

    async def leased(self, tenant: str, task_id: str) -> bool:
        """Whether a live replica runs the task (its lease has not lapsed)."""
        return bool(await self.redis.exists(f"{task_key(tenant, task_id)}:lease"))

    async def take_over(self, tenant: str, task_id: str) -> bool:
        """Take the lease of a task whose replica is gone; False when another replica took it
        first (or its own replica renewed it)."""
        key = task_key(tenant, task_id)
        taken = await self.redis.set(f"{key}:lease", self.replica, px=self.lease_ms, nx=True)
        if taken and await self.redis.hget(key, "status") not in ("working", "input_required"):
            # It ended between the poll's read and now (its finish took the lease with it):
            # not run again.
            await self.redis.delete(f"{key}:lease")
            return False
        if taken:
            await self.redis.hincrby(key, "attempts", 1)
            # The questions its call asked died with it: none is open, the task works again.
            await self.redis.delete(f"{key}:input")
            await self.input_answered(tenant, task_id, "")
        return bool(taken)

    async def release(self, tenant: str, task_id: str) -> None:
        """This replica stops running the task without an outcome (it is shutting down):
        the next poll on another replica takes it over at once."""
        await self.redis.delete(f"{task_key(tenant, task_id)}:lease")


def _record(
    tenant: str, task_id: str, raw: dict[str, str], inputs: dict[str, Any] | None = None
) -> TaskRecord:
    outcome = raw.get("outcome")
    return TaskRecord(
        task_id=task_id,
        tenant=tenant,
        agent=raw["agent"],
        status=raw["status"],  # type: ignore[arg-type]  # written only by the scripts
        message=raw.get("message", ""),
        created_ms=int(raw["created"]),
        updated_ms=int(raw["updated"]),
        ttl_ms=int(raw["ttl"]),
        poll_ms=int(raw["poll"]),
        call=TaskCall.from_json(json.loads(raw["call"])),
        attempts=int(raw.get("attempts", "1")),
        outcome=json.loads(outcome) if outcome else None,
        inputs=inputs or {},
    )


__all__ = ["TaskStore", "task_key"]
