"""MCP revision 2025-11-25's tasks on the handshake era, in-process over HTTP (the official
`mcp` client, 2.3, does not speak them: raw JSON-RPC, as that revision spells it):
initialize advertising what is served; a `tools/call` with `params.task` answered with a
task polled to its end and its result fetched by `tasks/result`; a cancel killing the
sandbox's call;
another caller's task id refused. The tasks are the 2026-07-28 wire's (one store, one runner:
tests/gateway/mcp_tasks/test_mcp_tasks.py covers take-over, deadlines and quotas there)."""

from __future__ import annotations

import random
import uuid
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest
from redis.asyncio import Redis

from conclave.bench.core import processes_with
from gateway.config import Settings
from gateway.identity.tokens import issue_token
from gateway.mcp_tasks import new_task_id
from tests.helpers import in_process_gateway, until

pytestmark = pytest.mark.anyio

VERSION = "2025-11-25"
RELATED = "io.modelcontextprotocol/related-task"


@pytest.fixture
async def http(settings: Settings, redis: Redis) -> AsyncIterator[httpx.AsyncClient]:
    tools = ("tools.builtin", "tools.harness.faults")  # `heavy_tailed_sleep`
    async with in_process_gateway(settings.model_copy(update={"tool_modules": tools})) as client:
        yield client


class Caller:
    """One agent on the handshake era at revision `version`."""

    def __init__(self, http: httpx.AsyncClient, settings: Settings, version: str = VERSION):
        self.http, self.version = http, version
        scopes = ["tool:echo", "tool:heavy_tailed_sleep", "tool:run_shell"]
        agent = f"a{uuid.uuid4().hex[:8]}"
        self.token = issue_token(settings, tenant="acme", agent=agent, scopes=scopes)

    async def send(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {self.token}", "MCP-Protocol-Version": self.version}
        message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        answer = await self.http.post("/mcp", json=message, headers=headers)
        assert answer.status_code == 200, answer.text
        body: dict[str, Any] = answer.json()
        return body

    async def task(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        params = {"name": name, "arguments": arguments, "task": {"ttl": 60_000}}
        created = (await self.send("tools/call", params))["result"]
        assert set(created) == {"task"}, created  # a CreateTaskResult, not the call's result
        task: dict[str, Any] = created["task"]
        return task

    async def until_ended(self, task_id: str, timeout_s: float = 20) -> dict[str, Any]:
        with anyio.fail_after(timeout_s):
            while True:
                task: dict[str, Any] = (await self.send("tasks/get", {"taskId": task_id}))["result"]
                if task["status"] != "working":
                    return task
                await anyio.sleep(0.05)  # a client polls: there is no event to await


async def test_initialize_and_tools_list_advertise_tasks_on_2025_11_25_only(
    http: httpx.AsyncClient, settings: Settings
) -> None:
    hello = {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "t"}}
    served = (await Caller(http, settings).send("initialize", hello))["result"]
    assert served["protocolVersion"] == VERSION
    assert served["capabilities"]["tasks"] == {"cancel": {}, "requests": {"tools": {"call": {}}}}
    older = {**hello, "protocolVersion": "2025-06-18"}
    answered = (await Caller(http, settings, "2025-06-18").send("initialize", older))["result"]
    assert "tasks" not in answered["capabilities"]
    listed = (await Caller(http, settings).send("tools/list", {}))["result"]["tools"]
    assert {tool["name"]: tool["execution"] for tool in listed} == {
        "echo": {"taskSupport": "optional"},
        "heavy_tailed_sleep": {"taskSupport": "optional"},
        "run_shell": {"taskSupport": "optional"},
    }
    older_list = await Caller(http, settings, "2025-06-18").send("tools/list", {})
    assert all("execution" not in tool for tool in older_list["result"]["tools"])


async def test_a_task_is_polled_to_its_end_and_its_result_fetched(
    http: httpx.AsyncClient, settings: Settings
) -> None:
    caller = Caller(http, settings)
    task = await caller.task("heavy_tailed_sleep", {"distribution": "fixed", "median_ms": 300})
    assert task["status"] == "working" and task["createdAt"].endswith("Z")
    assert task["ttl"] == 3_600_000 and task["pollInterval"] == 1000  # the gateway's choice
    assert "ttlMs" not in task and "result" not in task  # the 2025-11-25 shape
    done = await caller.until_ended(task["taskId"])
    assert done["status"] == "completed" and "result" not in done, done
    result = (await caller.send("tasks/result", {"taskId": task["taskId"]}))["result"]
    assert result["structuredContent"] == {"result": 300.0} and result["isError"] is False
    assert result["_meta"][RELATED] == {"taskId": task["taskId"]}
    assert "resultType" not in result


async def test_tasks_result_waits_for_the_task_to_end(
    http: httpx.AsyncClient, settings: Settings
) -> None:
    caller = Caller(http, settings)
    task = await caller.task("echo", {"message": "later"})
    result = (await caller.send("tasks/result", {"taskId": task["taskId"]}))["result"]
    assert result["structuredContent"] == {"result": "later"}


async def test_a_cancelled_task_stops_its_call(http: httpx.AsyncClient, settings: Settings) -> None:
    caller = Caller(http, settings)
    marker = f"25.{random.randrange(10**9):09d}"  # a sleep no other process here has
    task = await caller.task("run_shell", {"command": f"sleep {marker}"})
    await until(lambda: bool(processes_with(marker)), 30, poll_s=0.05)  # running in its sandbox
    cancelled = (await caller.send("tasks/cancel", {"taskId": task["taskId"]}))["result"]
    assert cancelled["taskId"] == task["taskId"] and cancelled["status"] == "cancelled"
    assert "tasks/cancel" in cancelled["statusMessage"]
    await until(lambda: not processes_with(marker), 5, poll_s=0.02)  # the sandbox call killed
    assert (await caller.until_ended(task["taskId"]))["status"] == "cancelled"
    outcome = await caller.send("tasks/result", {"taskId": task["taskId"]})
    assert outcome["error"]["data"]["code"] == "CANCELLED"
    again = await caller.send("tasks/cancel", {"taskId": task["taskId"]})
    assert again["error"]["code"] == -32602  # ended: the revision's answer


async def test_another_callers_task_id_is_refused(
    http: httpx.AsyncClient, settings: Settings
) -> None:
    owner, other = Caller(http, settings), Caller(http, settings)
    task = await owner.task("echo", {"message": "mine"})
    for method in ("tasks/get", "tasks/result", "tasks/cancel"):
        refused = await other.send(method, {"taskId": task["taskId"]})
        assert refused["error"]["code"] == -32602, method  # as if it did not exist
        assert refused["error"]["data"]["code"] == "NOT_FOUND"
    unknown = await owner.send("tasks/get", {"taskId": new_task_id()})
    assert unknown["error"]["code"] == -32602
    assert (await owner.until_ended(task["taskId"]))["status"] == "completed"
