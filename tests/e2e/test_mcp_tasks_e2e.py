"""MCP tasks end to end: the official `mcp` 2.x client on the 2026-07-28 wire, with the tasks
extension declared (tests/mcp_tasks_client.py), against a real gateway running tools in
Docker sandboxes: a task polled to its result, and a task cancelled, its sandbox's process
gone (on revision 2025-11-25's wire too)."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from conclave.bench.core import processes_with
from conclave.stack import EmbeddedStack
from tests.e2e.conftest import e2e_settings
from tests.helpers import until
from tests.mcp_tasks_client import CreateTaskResult, Tasks, cancel_task, get_task, poll_task

pytestmark = pytest.mark.anyio

VERSION = "2026-07-28"
ASK = {"conclave/task": True}  # Conclave's ask for a task (a short tool would not be one)


@pytest.fixture(scope="module")
def docker_stack(redis_url: str, docker_engine: object) -> Iterator[EmbeddedStack]:
    with EmbeddedStack(e2e_settings(redis_url, "docker")) as running:
        yield running


def _client(stack: EmbeddedStack, tasks: Tasks) -> tuple[Client, httpx.AsyncClient]:
    token = stack.token("acme", f"t{random.randrange(10**9)}", ["tool:run_shell"])
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    transport = streamable_http_client(f"{stack.url}/mcp", http_client=http)
    return Client(transport, extensions=[tasks]), http


async def test_the_mcp_client_polls_a_task_to_its_result(docker_stack: EmbeddedStack) -> None:
    tasks = Tasks()
    mcp, http = _client(docker_stack, tasks)
    async with http, mcp:
        assert mcp.protocol_version == VERSION
        discovered = mcp.session.discover_result
        assert discovered is not None
        assert "io.modelcontextprotocol/tasks" in (discovered.capabilities.extensions or {})
        command = {"command": "sleep 1; echo finished"}
        began = time.monotonic()
        result = await mcp.call_tool("run_shell", command, meta=ASK)  # type: ignore[arg-type]
        assert time.monotonic() - began >= 1
    assert len(tasks.seen) == 1  # answered with a task, polled by tasks/get to its end
    assert not result.is_error, result
    assert result.structured_content is not None
    assert result.structured_content["stdout"] == "finished\n"


async def test_a_cancelled_task_stops_its_sandbox_call(docker_stack: EmbeddedStack) -> None:
    mcp, http = _client(docker_stack, Tasks())
    marker = f"25.{random.randrange(10**9):09d}"  # a sleep no other process here has
    async with http, mcp:
        created = await mcp.session.call_tool(
            "run_shell",
            {"command": f"sleep {marker}"},
            meta=ASK,  # type: ignore[arg-type]
            allow_claimed=True,
        )
        assert isinstance(created, CreateTaskResult) and created.status == "working"
        await until(lambda: bool(processes_with(marker)), 30, poll_s=0.05)
        assert (await get_task(mcp.session, created.task_id)).status == "working"
        await cancel_task(mcp.session, created.task_id)
        await until(lambda: not processes_with(marker), 5, poll_s=0.02)
        ended = await poll_task(mcp.session, created.task_id, timeout_s=10)
    assert ended.status == "cancelled" and "tasks/cancel" in (ended.status_message or "")
    assert ended.result is None  # nothing was answered for it


async def test_a_2025_11_25_task_cancelled_stops_its_sandbox_call(
    docker_stack: EmbeddedStack,
) -> None:
    """The same task on the handshake era (revision 2025-11-25, raw JSON-RPC: the `mcp` 2.x
    client does not speak that revision's tasks): `tasks/cancel` kills the Docker call."""
    token = docker_stack.token("acme", f"t{random.randrange(10**9)}", ["tool:run_shell"])
    headers = {"Authorization": f"Bearer {token}", "MCP-Protocol-Version": "2025-11-25"}
    marker = f"25.{random.randrange(10**9):09d}"

    async def send(http: httpx.AsyncClient, method: str, params: dict[str, Any]) -> Any:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        answer = await http.post(f"{docker_stack.url}/mcp", json=body, headers=headers)
        assert answer.status_code == 200, answer.text
        return answer.json()

    async with httpx.AsyncClient(timeout=60) as http:
        call = {"name": "run_shell", "arguments": {"command": f"sleep {marker}"}, "task": {}}
        task = (await send(http, "tools/call", call))["result"]["task"]
        await until(lambda: bool(processes_with(marker)), 30, poll_s=0.05)
        cancelled = (await send(http, "tasks/cancel", {"taskId": task["taskId"]}))["result"]
        assert cancelled["status"] == "cancelled"
        await until(lambda: not processes_with(marker), 5, poll_s=0.02)
        outcome = await send(http, "tasks/result", {"taskId": task["taskId"]})
    assert outcome["error"]["data"]["code"] == "CANCELLED"
