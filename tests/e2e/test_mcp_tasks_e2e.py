"""MCP tasks end to end: the official `mcp` 2.x client on the 2026-07-28 wire, with the tasks
extension declared (tests/mcp_tasks_client.py), against a real gateway running tools in
Docker sandboxes: a task polled to its result, and a task cancelled, its sandbox's process
gone."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator

import httpx
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from conclave.stack import EmbeddedStack
from tests.e2e.conftest import e2e_settings
from tests.helpers import processes_with, until
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
