"""MCP tasks (`io.modelcontextprotocol/tasks`) on the 2026-07-28 wire, in-process: a
long-running tool's call answered with a task, polled to its result; a task asked for; the
budget's deadline ending one; a cancel stopping its call; a task of a replica
that died taken over by the next poll (run again when the tool is idempotent, failed when
not; the questions its call had asked gone with it); and what the record costs its tenant
in Redis."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest
from redis.asyncio import Redis

from gateway.config import Settings
from gateway.gateway_error import GatewayError
from gateway.identity.tokens import issue_token
from gateway.mcp_tasks import TaskCall, TaskStore, new_task_id, task_key
from protocol import Principal
from tests.helpers import in_process_gateway

pytestmark = pytest.mark.anyio

VERSION = "2026-07-28"
TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
_NAMED_BY = {"tools/call": "name", "tasks/get": "taskId", "tasks/cancel": "taskId"}
_NAMED_BY["tasks/update"] = "taskId"
_LIMITS = {"ttl_ms": 60_000, "poll_ms": 100}  # a store's, where a test makes one


@pytest.fixture
async def http(settings: Settings, redis: Redis) -> AsyncIterator[httpx.AsyncClient]:
    tools = ("tools.builtin", "tools.harness.faults")  # `heavy_tailed_sleep`: long-running
    # The gateway's own lease outlives a loaded machine's stalls (CI saw a re-run's 600 ms
    # lease lapse and a third attempt); a dead replica's tasks here lapse at once (`_orphan`).
    async with in_process_gateway(
        settings.model_copy(update={"tool_modules": tools, "task_lease_ms": 2000})
    ) as client:
        yield client


def _principal(tenant: str, agent: str) -> Principal:
    return Principal(tenant=tenant, agent=agent, expires_at=2**40, token_id="t")


class Caller:
    """One agent speaking the 2026-07-28 wire, declaring the tasks extension or not."""

    def __init__(self, http: httpx.AsyncClient, settings: Settings, *, tasks: bool = True):
        self.http = http
        self.agent = f"a{uuid.uuid4().hex[:8]}"
        scopes = ["tool:echo", "tool:heavy_tailed_sleep", "tool:run_python", "tool:run_shell"]
        self.token = issue_token(settings, tenant="acme", agent=self.agent, scopes=scopes)
        self.capabilities = TASKS if tasks else {}

    @property
    def principal(self) -> Principal:
        return _principal("acme", self.agent)

    async def send(
        self, method: str, params: dict[str, Any], meta: dict[str, Any] | None = None
    ) -> httpx.Response:
        envelope = {
            "io.modelcontextprotocol/protocolVersion": VERSION,
            "io.modelcontextprotocol/clientCapabilities": self.capabilities,
            **(meta or {}),
        }
        sent = {**params, "_meta": envelope}
        headers = {
            "Authorization": f"Bearer {self.token}",
            "MCP-Protocol-Version": VERSION,
            "Mcp-Method": method,
        }
        if (field := _NAMED_BY.get(method)) is not None:
            headers["Mcp-Name"] = str(params[field])
        message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": sent}
        return await self.http.post("/mcp", json=message, headers=headers)

    async def call(self, name: str, arguments: dict[str, Any], **meta: Any) -> dict[str, Any]:
        answer = await self.send("tools/call", {"name": name, "arguments": arguments}, meta)
        assert answer.status_code == 200, answer.text
        result: dict[str, Any] = answer.json()["result"]
        return result

    async def get(self, task_id: str) -> dict[str, Any]:
        answer = await self.send("tasks/get", {"taskId": task_id})
        assert answer.status_code == 200, answer.text
        task: dict[str, Any] = answer.json()["result"]
        return task

    async def until_ended(self, task_id: str, timeout_s: float = 20) -> dict[str, Any]:
        with anyio.fail_after(timeout_s):
            while (task := await self.get(task_id))["status"] == "working":  # noqa: ASYNC110
                await anyio.sleep(0.05)  # a client polls: there is no event to await
        return task


async def test_discover_advertises_the_tasks_extension(
    http: httpx.AsyncClient, settings: Settings
) -> None:
    answer = await Caller(http, settings).send("server/discover", {})
    extensions = answer.json()["result"]["capabilities"]["extensions"]
    assert extensions == {"io.modelcontextprotocol/tasks": {}}


async def test_a_long_running_tool_answers_a_task_polled_to_its_result(
    http: httpx.AsyncClient, settings: Settings
) -> None:
    caller = Caller(http, settings)
    sleep = {"distribution": "fixed", "median_ms": 300}
    created = await caller.call("heavy_tailed_sleep", sleep)  # declares a 60 s timeout
    assert created["resultType"] == "task" and created["status"] == "working"
    assert created["ttlMs"] == 3_600_000 and created["pollIntervalMs"] == 1000
    assert created["createdAt"].endswith("Z")
    working = await caller.get(created["taskId"])  # durably created: found at once
    assert working["resultType"] == "complete" and working["status"] == "working"
    done = await caller.until_ended(created["taskId"])
    assert done["status"] == "completed", done
    assert done["result"]["structuredContent"] == {"result": 300.0}
    assert done["result"]["isError"] is False and done["result"]["resultType"] == "complete"
    # A client that does not declare the extension never gets a task: the plain result.
    plain = await Caller(http, settings, tasks=False).call("heavy_tailed_sleep", sleep)
    assert plain["resultType"] == "complete" and plain["structuredContent"] == {"result": 300.0}


async def test_a_task_asked_for_is_its_owners_alone(
    http: httpx.AsyncClient, settings: Settings
) -> None:
    owner, other = Caller(http, settings), Caller(http, settings)
    created = await owner.call("echo", {"message": "later"}, **{"conclave/task": True})
    assert created["resultType"] == "task"
    done = await owner.until_ended(created["taskId"])
    assert done["status"] == "completed" and done["result"]["structuredContent"] == {
        "result": "later"
    }
    for method in ("tasks/get", "tasks/cancel", "tasks/update"):
        params: dict[str, Any] = {"taskId": created["taskId"], "inputResponses": {}}
        refused = await other.send(method, params)
        assert refused.status_code == 200, refused.text
        assert refused.json()["error"]["code"] == -32602, method  # as if it did not exist
        assert refused.json()["error"]["data"]["code"] == "NOT_FOUND"
    unknown = await owner.send("tasks/get", {"taskId": new_task_id()})
    assert unknown.json()["error"]["code"] == -32602
    undeclared = await Caller(http, settings, tasks=False).send(
        "tasks/get", {"taskId": created["taskId"]}
    )
    assert undeclared.status_code == 400
    error = undeclared.json()["error"]
    assert error["code"] == -32021
    assert error["data"]["requiredCapabilities"] == TASKS
    # A refused call is answered as it always is: no task is made for it.
    refused_call = await owner.call("run_shell_nope", {}, **{"conclave/task": True})
    assert refused_call["resultType"] == "complete" and refused_call["isError"] is True


async def test_the_budgets_deadline_ends_a_task_with_its_serf_error(
    http: httpx.AsyncClient, settings: Settings
) -> None:
    caller = Caller(http, settings)
    deadline = int(time.time() * 1000) + 1500
    sleep = {"distribution": "fixed", "median_ms": 20_000}
    created = await caller.call("heavy_tailed_sleep", sleep, **{"conclave/deadline_ms": deadline})
    done = await caller.until_ended(created["taskId"])
    assert int(time.time() * 1000) - deadline < 5000  # killed at its deadline, not at 20 s
    # What the call would have answered: a tool error, the budget's grant (the time left
    # before the deadline) run out, with the SERF envelope.
    assert done["status"] == "completed" and done["result"]["isError"] is True, done
    error = done["result"]["_meta"]["conclave/error"]
    assert error["code"] == "TOOL_TIMEOUT" and error["details"]["granted_ms"] <= 1500


async def test_a_cancelled_task_stops_its_call(http: httpx.AsyncClient, settings: Settings) -> None:
    """The call stops at once, not when its 20 s are up (that its sandbox's processes are gone
    is tests/e2e/test_mcp_tasks_e2e.py's, on Docker)."""
    caller = Caller(http, settings)
    sleep = {"distribution": "fixed", "median_ms": 20_000}
    created = await caller.call("heavy_tailed_sleep", sleep)
    began = time.monotonic()
    cancelled = await caller.send("tasks/cancel", {"taskId": created["taskId"]})
    ack = cancelled.json()["result"]  # an empty acknowledgement, no task envelope
    assert ack["resultType"] == "complete" and set(ack) == {"resultType", "_meta"}
    done = await caller.until_ended(created["taskId"], timeout_s=10)
    assert done["status"] == "cancelled" and "tasks/cancel" in done["statusMessage"]
    assert "result" not in done and time.monotonic() - began < 10
    again = await caller.send("tasks/cancel", {"taskId": created["taskId"]})
    assert again.status_code == 200 and "error" not in again.json()  # ended: acknowledged


async def _orphan(redis: Redis, caller: Caller, call: TaskCall) -> str:
    """A task as a replica that died leaves it: working, its lease lapsing at once."""
    dead = TaskStore(redis, replica="dead:1", **_LIMITS, lease_ms=1, quota_bytes=10**9)
    task_id = new_task_id()
    await dead.create(caller.principal, task_id, call)
    with anyio.fail_after(5):
        while await dead.leased("acme", task_id):  # noqa: ASYNC110 (a key expiring in Redis)
            await anyio.sleep(0.01)
    return task_id


async def test_a_dead_replicas_idempotent_task_is_run_again_by_the_next_poll(
    http: httpx.AsyncClient, settings: Settings, redis: Redis
) -> None:
    caller = Caller(http, settings)
    deadline = int(time.time() * 1000) + 30_000
    call = TaskCall("echo", {"message": "again"}, deadline, idempotent=True)
    task_id = await _orphan(redis, caller, call)
    done = await caller.until_ended(task_id)
    assert done["status"] == "completed", done
    assert done["result"]["structuredContent"] == {"result": "again"}
    assert await redis.hget(task_key("acme", task_id), "attempts") == "2"
    # Not idempotent: not run twice, failed with what happened.
    unsafe = TaskCall("run_shell", {"command": "true"}, deadline, idempotent=False)
    lost = await caller.until_ended(await _orphan(redis, caller, unsafe))
    assert lost["status"] == "completed" and lost["result"]["isError"] is True, lost
    assert lost["result"]["_meta"]["conclave/error"]["code"] == "SANDBOX_KILLED"
    # Past its deadline: the budget refuses to start it again.
    late = TaskCall("echo", {"message": "x"}, int(time.time() * 1000) - 1, idempotent=True)
    expired = await caller.until_ended(await _orphan(redis, caller, late))
    assert expired["result"]["_meta"]["conclave/error"]["code"] == "DEADLINE_EXCEEDED", expired


async def test_a_task_that_ended_after_a_poll_read_it_is_not_taken_over(
    http: httpx.AsyncClient, settings: Settings, redis: Redis
) -> None:
    """A poll reads the task working and its lease gone, while the replica re-running it
    writes its outcome (the lease goes with it): the poll's take-over must not run it a
    third time (CI saw `attempts` 3 under load)."""
    caller = Caller(http, settings)
    call = TaskCall("echo", {"message": "once"}, None, idempotent=True)
    task_id = await _orphan(redis, caller, call)
    store = TaskStore(redis, replica="r:2", **_LIMITS, lease_ms=5000, quota_bytes=10**9)
    assert await store.finish("acme", task_id, "completed", {"content": []})
    assert not await store.take_over("acme", task_id)  # as the late poll would
    assert await redis.hget(task_key("acme", task_id), "attempts") == "1"
    assert not await store.leased("acme", task_id)


async def test_a_dead_replicas_task_waiting_for_input_is_taken_over_with_no_question_open(
    http: httpx.AsyncClient, settings: Settings, redis: Redis
) -> None:
    caller = Caller(http, settings)
    deadline = int(time.time() * 1000) + 30_000
    call = TaskCall("echo", {"message": "asked"}, deadline, idempotent=True)
    task_id = await _orphan(redis, caller, call)
    store = TaskStore(redis, replica="dead:1", **_LIMITS, lease_ms=1, quota_bytes=10**9)
    question = {"method": "elicitation/create", "params": {"message": "who?"}}
    assert await store.ask_input("acme", task_id, "conclave-q.0", question)
    waiting = await store.get(caller.principal, task_id)
    assert waiting is not None and waiting.wire()["status"] == "input_required"
    assert waiting.wire()["inputRequests"] == {"conclave-q.0": question}
    # Its call died with its replica, and the question with it: the poll that takes the task
    # over shows none open, and the call run again ends the task.
    taken = await caller.get(task_id)
    assert taken["status"] != "input_required" and "inputRequests" not in taken, taken
    done = await caller.until_ended(task_id)
    assert done["status"] == "completed", done
    assert done["result"]["structuredContent"] == {"result": "asked"}


async def test_a_dead_replicas_task_cancelled_ends_cancelled(
    http: httpx.AsyncClient, settings: Settings, redis: Redis
) -> None:
    caller = Caller(http, settings)
    call = TaskCall("echo", {"message": "never"}, None, idempotent=True)
    task_id = await _orphan(redis, caller, call)
    await caller.send("tasks/cancel", {"taskId": task_id})
    assert (await caller.get(task_id))["status"] == "cancelled"
    # A cancel that reached the record while a replica was taking the task over (the lease
    # held, no call running yet to stop): the call taken over is stopped before it runs.
    taken = await _orphan(redis, caller, call)
    store = TaskStore(redis, replica="r:2", **_LIMITS, lease_ms=5000, quota_bytes=10**9)
    await store.ask_cancel("acme", taken, "the caller sent tasks/cancel")
    ended = await caller.until_ended(taken)
    assert ended["status"] == "cancelled" and "result" not in ended, ended


async def test_a_task_record_counts_in_its_tenants_usage_once(redis: Redis) -> None:
    store = TaskStore(redis, replica="r:1", **_LIMITS, lease_ms=5000, quota_bytes=10**6)
    owner = _principal("acme", "bob")
    task_id = new_task_id()
    await store.create(owner, task_id, TaskCall("echo", {"message": "m"}, None, True))
    created = int(await redis.hget("cc:{t:acme}:usage", "held") or 0)
    assert created > 0
    assert await store.finish("acme", task_id, "completed", {"content": []}, "done")
    finished = int(await redis.hget("cc:{t:acme}:usage", "held") or 0)
    assert finished > created  # its outcome's bytes too
    assert not await store.finish("acme", task_id, "cancelled", None)  # ended: once
    record = await store.get(owner, task_id)
    assert (
        record is not None
        and record.status == "completed"
        and not await store.leased("acme", task_id)
    )
    assert await store.get(_principal("acme", "eve"), task_id) is None
    assert await store.get(_principal("other", "bob"), task_id) is None
    assert 0 < await redis.pttl(task_key("acme", task_id)) <= 60_000


async def test_a_task_over_its_tenants_byte_quota_is_refused(redis: Redis) -> None:
    store = TaskStore(redis, replica="r:1", **_LIMITS, lease_ms=5000, quota_bytes=600)
    owner = _principal("acme", "bob")
    call = TaskCall("echo", {"message": "m" * 200}, None, True)
    await store.create(owner, new_task_id(), call)
    with pytest.raises(GatewayError) as refused:
        await store.create(owner, new_task_id(), call)
    assert refused.value.error.code == "STATE_QUOTA_EXCEEDED"
    assert "state_quota_bytes" in refused.value.error.message
