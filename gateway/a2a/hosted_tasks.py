"""`HostedTasks`: the tasks of hosted A2A agents (`[[a2a_agent]]` without a url) as owned
state in Redis, where every replica and every worker finds them.

Key layout (one hash tag per agent, `{a2a:<agent>}`: one agent's keys share a slot, so a
script reaches its queue and its tasks together):

- ``conclave:{a2a:<agent>}:t:<id>``      hash: owner (`tenant/agent`), context, state,
  status (JSON), caller (JSON), deadline (unix ms, or ''), token (the fencing counter, only
  grows), lease_until (unix ms; 0: no worker holds it), answer (the agent's message, when it
  answered with a message alone). Expires `ttl_s` after creation.
- ``...:h:<id>``, ``...:a:<id>``            lists: the history's messages, the artifacts (JSON;
  chunks merged when read: `artifact_chunks`).
- ``...:e:<id>``                            stream: the task's events (field `status` or
  `artifact`), read by SendMessage, SendStreamingMessage and SubscribeToTask on any replica.
- ``...:queue``                             list: task ids waiting for a worker.
- ``...:leases``, ``...:deadlines``         zsets: id -> lease end / caller's deadline (ms).
- ``...:owned:<tenant/agent>``              zset: a caller's task ids by creation (ListTasks).
- ``...:c:<id>``                            set: the tasks delegated for this one
  ("agent/task id"), ended with it (`gateway.delegation.TaskCascade`).

Every change a worker or the gateway makes is one script (`lua/hosted_*.lua`), so a write
checks the fencing token and the lease in the same step it lands in.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from redis.asyncio import Redis

from gateway.a2a.artifact_chunks import artifact_update, chunk_entry, merged_artifacts
from gateway.redis_io import lua_script
from protocol import A2aCaller, A2aWorkItem, Principal, SerfError

ENDED = frozenset(
    {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"}
)
INTERRUPTED = frozenset({"TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"})
OWNED_SCAN_MAX = 1000  # a caller's latest tasks ListTasks looks through (filters and totals)

_CLAIM = lua_script("gateway.a2a", "hosted_states", "hosted_claim")
_WRITE = lua_script("gateway.a2a", "hosted_states", "hosted_write")
_END = lua_script("gateway.a2a", "hosted_states", "hosted_end")
_REQUEUE = lua_script("gateway.a2a", "hosted_states", "hosted_requeue")


def _prefix(agent: str) -> str:
    return f"conclave:{{a2a:{agent}}}:"


def now_ms() -> int:
    return int(time.time() * 1000)


def new_task_id() -> str:
    return uuid.uuid4().hex


def task_ref(agent: str, task_id: str) -> str:
    """How a chain, and a parent task's set of children, name a hosted task."""
    return f"{agent}/{task_id}"


def owner_key(principal: Principal) -> str:
    return f"{principal.tenant}/{principal.agent}"


def status_json(
    state: str, task_id: str, context_id: str, *, text: str = "", serf: SerfError | None = None
) -> str:
    """A TaskStatus as JSON: the state, now, and (with `text` or `serf`) the agent's message,
    a SERF envelope in its metadata."""
    stamp = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    status: dict[str, Any] = {"state": state, "timestamp": stamp}
    if text or serf is not None:
        message: dict[str, Any] = {
            "messageId": uuid.uuid4().hex,
            "role": "ROLE_AGENT",
            "taskId": task_id,
            "contextId": context_id,
            "parts": [{"text": text or (serf.message if serf else "")}],
        }
        if serf is not None:
            message["metadata"] = {"serf": serf.model_dump(mode="json", exclude_none=True)}
        status["message"] = message
    return json.dumps(status, separators=(",", ":"))


@dataclass(frozen=True)
class _Snapshot:
    owner: str  # `tenant/agent`: who created it
    task: dict[str, Any]  # the Task, A2A JSON
    last_event: str  # the id of its stream's last event
    answer: dict[str, Any] | None  # the message its agent answered with alone, if it did


@dataclass(frozen=True)
class WriteOutcome:
    """What a worker's write did: `verdict` OK, CANCELED, ENDED, FENCED or GONE."""

    verdict: str
    lease_expires_ms: int = 0


class HostedTasks:
    def __init__(self, redis: Redis, ttl_s: int) -> None:
        self.redis = redis
        self.ttl_s = ttl_s
        self._claim = redis.register_script(_CLAIM.text)
        self._write = redis.register_script(_WRITE.text)
        self._end = redis.register_script(_END.text)
        self._requeue = redis.register_script(_REQUEUE.text)

    # --- the caller's side ------------------------------------------------------------

    async def create(
        self,
        agent: str,
        principal: Principal,
        message: dict[str, Any],
        deadline_ms: int | None,
        chain: str = "",
        task_id: str | None = None,
    ) -> str:
        """A new submitted task holding `message`, owned by `principal`, queued for a worker
        (its id `task_id`, or a new one), `chain` the delegation chain its worker sends on."""
        task_id = task_id or new_task_id()
        context_id = str(message.get("contextId") or uuid.uuid4().hex)
        message = {**_without_ids(message), "taskId": task_id, "contextId": context_id}
        p, owner = _prefix(agent), owner_key(principal)
        caller = A2aCaller(
            tenant=principal.tenant, agent=principal.agent, obo=principal.obo, chain=chain
        )
        status = status_json("TASK_STATE_SUBMITTED", task_id, context_id)
        async with self.redis.pipeline(transaction=True) as tx:
            tx.hset(
                p + f"t:{task_id}",
                mapping={
                    "owner": owner,
                    "context": context_id,
                    "state": "TASK_STATE_SUBMITTED",
                    "status": status,
                    "caller": caller.model_dump_json(),
                    "deadline": "" if deadline_ms is None else str(deadline_ms),
                    "token": 0,
                    "lease_until": 0,
                },
            )
            tx.expire(p + f"t:{task_id}", self.ttl_s)
            tx.rpush(p + f"h:{task_id}", json.dumps(message))
            tx.expire(p + f"h:{task_id}", self.ttl_s)
            tx.xadd(p + f"e:{task_id}", {"status": status})
            tx.expire(p + f"e:{task_id}", self.ttl_s)
            tx.zadd(p + f"owned:{owner}", {task_id: now_ms()})
            tx.expire(p + f"owned:{owner}", self.ttl_s)
            if deadline_ms is not None:
                tx.zadd(p + "deadlines", {task_id: deadline_ms})
            tx.rpush(p + "queue", task_id)
            await tx.execute()
        return task_id

    async def task(
        self, agent: str, task_id: str, principal: Principal | None, history: int | None = None
    ) -> dict[str, Any] | None:
        """The Task (A2A JSON) if `principal` created it (None: unknown, or another's);
        `principal` None reads it for the gateway itself. `history`: the last n messages."""
        found = await self._snapshot(agent, task_id)
        if found is None or (principal is not None and found.owner != owner_key(principal)):
            return None
        task = found.task
        if history is not None:
            task["history"] = task["history"][-history:] if history > 0 else []
        return task

    async def result(self, agent: str, task_id: str, principal: Principal) -> dict[str, Any] | None:
        """What SendMessage answers about the task `principal` created: `{"message": ...}`
        when its agent answered with a message alone (A2A lets an agent answer so), else
        `{"task": Task}`; None: unknown, or another's."""
        found = await self._snapshot(agent, task_id)
        if found is None or found.owner != owner_key(principal):
            return None
        return {"message": found.answer} if found.answer else {"task": found.task}

    async def _snapshot(self, agent: str, task_id: str) -> _Snapshot | None:
        """The task as it is, read in one step."""
        p = _prefix(agent)
        async with self.redis.pipeline(transaction=True) as tx:
            tx.hmget(p + f"t:{task_id}", ["owner", "context", "status", "answer"])
            tx.lrange(p + f"h:{task_id}", 0, -1)
            tx.lrange(p + f"a:{task_id}", 0, -1)
            tx.xrevrange(p + f"e:{task_id}", count=1)
            (owner, context, status, answer), history, artifacts, last = await tx.execute()
        if owner is None:
            return None
        task: dict[str, Any] = {
            "id": task_id,
            "contextId": context,
            "status": json.loads(status),
            "history": [json.loads(m) for m in history],
        }
        if artifacts:
            task["artifacts"] = merged_artifacts(artifacts)
        answered = json.loads(answer) if answer else None
        return _Snapshot(owner, task, last[0][0] if last else "0-0", answered)

    async def owned(
        self, agent: str, principal: Principal, *, context: str | None, state: str | None
    ) -> list[str]:
        """The ids of the caller's live tasks, newest first (the latest `OWNED_SCAN_MAX`),
        those in `context` and in `state` only when given: one read of the index, one of
        each task's context and state."""
        p = _prefix(agent)
        key = p + f"owned:{owner_key(principal)}"
        ids = [str(i) for i in await self.redis.zrevrange(key, 0, OWNED_SCAN_MAX - 1)]
        async with self.redis.pipeline(transaction=False) as tx:
            for task_id in ids:
                tx.hmget(p + f"t:{task_id}", ["context", "state"])
            found = await tx.execute() if ids else []
        return [
            task_id
            for task_id, (in_context, in_state) in zip(ids, found, strict=True)
            if in_context is not None  # expired: gone from the list
            and (context is None or in_context == context)
            and (state is None or in_state == state)
        ]

    async def end(
        self, agent: str, task_id: str, state: str, status: str, *, lapsed_by: int | None = None
    ) -> tuple[str, str]:
        """End the task as `state` unless it ended (`(verdict, its state)`): OK, ENDED, LIVE
        (with `lapsed_by`: its lease holds past then), GONE."""
        p = _prefix(agent)
        answer = await self._end(
            keys=_END.keys(
                task=p + f"t:{task_id}",
                events=p + f"e:{task_id}",
                leases=p + "leases",
                deadlines=p + "deadlines",
            ),
            args=_END.argv(
                id=task_id,
                state=state,
                status=status,
                when="any" if lapsed_by is None else lapsed_by,
            ),
        )
        return str(answer[0]), str(answer[1]) if len(answer) > 1 else state

    async def requeue(self, agent: str, task_id: str, message: dict[str, Any] | None) -> str:
        """Back to the queue: a lapsed lease's task (`message` None), or an interrupted task
        with the caller's answer. OK, or the state it was in."""
        p = _prefix(agent)
        context = str(await self.redis.hget(p + f"t:{task_id}", "context") or "")
        status = status_json("TASK_STATE_SUBMITTED", task_id, context)
        if message is not None:
            message = {**_without_ids(message), "taskId": task_id, "contextId": context}
        answer = await self._requeue(
            keys=_REQUEUE.keys(
                task=p + f"t:{task_id}",
                history=p + f"h:{task_id}",
                events=p + f"e:{task_id}",
                leases=p + "leases",
                queue=p + "queue",
            ),
            args=_REQUEUE.argv(
                id=task_id,
                status=status,
                now_ms=now_ms(),
                message="" if message is None else json.dumps(message),
            ),
        )
        return "OK" if answer[0] == "OK" else str(answer[1])

    async def events(
        self, agent: str, task_id: str, after: str, until: frozenset[str] = ENDED | INTERRUPTED
    ) -> AsyncIterator[dict[str, Any]]:
        """The task's events after stream id `after`, as A2A stream responses, until one puts
        the task in a state of `until` (by default: it ends or is interrupted; the caller stops
        reading to stop sooner)."""
        p = _prefix(agent)
        context = await self.redis.hget(p + f"t:{task_id}", "context")
        while True:
            read: list[Any] = await self.redis.xread(  # type: ignore[assignment]
                {p + f"e:{task_id}": after}, block=1000, count=64
            )
            for _stream, entries in read:
                for entry_id, fields in entries:
                    after = entry_id
                    if "artifact" in fields:
                        update = artifact_update(fields["artifact"])
                        yield {
                            "artifactUpdate": {"taskId": task_id, "contextId": context, **update}
                        }
                        continue
                    status = json.loads(fields["status"])
                    yield {
                        "statusUpdate": {"taskId": task_id, "contextId": context, "status": status}
                    }
                    if status["state"] in until:
                        return

    async def snapshot_for_stream(
        self, agent: str, task_id: str, principal: Principal
    ) -> tuple[dict[str, Any], str] | None:
        """(the Task, its stream's last event id) if `principal` created it."""
        found = await self._snapshot(agent, task_id)
        if found is None or found.owner != owner_key(principal):
            return None
        return found.task, found.last_event

    # --- the workers' side ------------------------------------------------------------

    async def claim(self, agent: str, lease_ms: int) -> A2aWorkItem | None:
        """The next queued task, leased to the caller (None: none waits)."""
        p = _prefix(agent)
        working = status_json("TASK_STATE_WORKING", "", "")
        answer = await self._claim(
            keys=_CLAIM.keys(queue=p + "queue", leases=p + "leases"),
            args=_CLAIM.argv(prefix=p, now_ms=now_ms(), lease_ms=lease_ms, status=working),
        )
        if not answer:
            return None
        task_id, token, expires = str(answer[0]), int(answer[1]), int(answer[2])
        async with self.redis.pipeline(transaction=True) as tx:
            tx.hmget(p + f"t:{task_id}", ["context", "caller", "deadline"])
            tx.lrange(p + f"h:{task_id}", 0, -1)
            (context, caller, deadline), history = await tx.execute()
        return A2aWorkItem(
            task_id=task_id,
            context_id=context,
            messages=[json.loads(m) for m in history],
            caller=A2aCaller.model_validate_json(caller),
            deadline_ms=int(deadline) if deadline else None,
            token=token,
            lease_expires_ms=expires,
        )

    async def write(
        self,
        agent: str,
        task_id: str,
        token: int,
        lease_ms: int,
        state: str,
        message: dict[str, Any] | None,
        artifact: dict[str, Any] | None,
        *,
        as_message: bool = False,
        append: bool = False,
        last_chunk: bool | None = None,
    ) -> WriteOutcome:
        """A worker's fenced write (hosted_write.lua); `as_message`: `message` is the agent's
        whole answer (SendMessage answers it alone); `append`, `last_chunk`: `artifact` is a
        chunk of the artifact of its id (`artifact_chunks`)."""
        p = _prefix(agent)
        context = str(await self.redis.hget(p + f"t:{task_id}", "context") or "")
        status = json.loads(status_json(state, task_id, context))
        if message is not None:
            message = {**_without_ids(message), "taskId": task_id, "contextId": context}
            message.update(
                role="ROLE_AGENT", messageId=message.get("messageId") or uuid.uuid4().hex
            )
            status["message"] = message
        answer = await self._write(
            keys=_WRITE.keys(
                task=p + f"t:{task_id}",
                history=p + f"h:{task_id}",
                artifacts=p + f"a:{task_id}",
                events=p + f"e:{task_id}",
                leases=p + "leases",
                deadlines=p + "deadlines",
            ),
            args=_WRITE.argv(
                id=task_id,
                token=str(token),
                now_ms=now_ms(),
                lease_ms=lease_ms,
                state=state,
                status=json.dumps(status, separators=(",", ":")),
                message="" if message is None else json.dumps(message),
                artifact="" if artifact is None else chunk_entry(artifact, append, last_chunk),
                answer="1" if as_message and message is not None else "",
            ),
        )
        return WriteOutcome(str(answer[0]), int(answer[1]) if answer[0] == "OK" else 0)

    async def owner(self, ref: str) -> str | None:
        """The `tenant/agent` that created task `ref` (None: no such task)."""
        agent, _, task_id = ref.partition("/")
        owner = await self.redis.hget(_prefix(agent) + f"t:{task_id}", "owner")
        return None if owner is None else str(owner)

    async def adopt(self, parent: str, child: str) -> None:
        """Record `child` (a task ref) as delegated for task `parent`, so it ends with it."""
        agent, _, task_id = parent.partition("/")
        key = _prefix(agent) + f"c:{task_id}"
        async with self.redis.pipeline(transaction=True) as tx:
            tx.sadd(key, child)
            tx.expire(key, self.ttl_s)
            await tx.execute()

    async def children(self, parent: str) -> list[str]:
        """The task refs delegated for task `parent` (its set is read once, then dropped)."""
        agent, _, task_id = parent.partition("/")
        key = _prefix(agent) + f"c:{task_id}"
        async with self.redis.pipeline(transaction=True) as tx:
            tx.smembers(key)
            tx.delete(key)
            members, _ = await tx.execute()
        return sorted(str(m) for m in members)

    async def due(self, agent: str) -> tuple[list[str], list[str]]:
        """(ids whose lease ended, ids whose caller's deadline passed), up to 100 each."""
        p, now = _prefix(agent), now_ms()
        lapsed = await self.redis.zrangebyscore(p + "leases", "-inf", now, start=0, num=100)
        late = await self.redis.zrangebyscore(p + "deadlines", "-inf", now, start=0, num=100)
        return [str(i) for i in lapsed], [str(i) for i in late]


def _without_ids(message: dict[str, Any]) -> dict[str, Any]:
    """`message` without the task and context ids it names (in either spelling): the task's
    own are set in their place."""
    names = ("taskId", "task_id", "contextId", "context_id")
    return {k: v for k, v in message.items() if k not in names}
