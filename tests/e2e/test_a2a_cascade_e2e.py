"""A chain of three hosted agents, end to end: a caller asks `lead` (A), whose worker delegates
to `drafter` (B), whose worker delegates to `runner` (C), whose worker runs a `run_shell` sleep
in a real sandbox (docker). Two gateway replicas under uvicorn on one real Redis; the workers
are the SDK's (`serve_a2a`). Cancelling A's task on the other replica cancels B's and C's and
kills C's tool process; under the caller's deadline, B and C stop at it, and so does C's tool.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from agents import GatewayClient, WorkItem, serve_a2a
from conclave.bench.core import processes_with
from conclave.stack import EmbeddedStack
from tests.e2e.conftest import e2e_settings

# serial: timing-bound (how soon a cancel reaches a process three hops down)
pytestmark = [pytest.mark.anyio, pytest.mark.serial]

TENANT = "t-chain"
_CHAIN = ("lead", "drafter", "runner")  # A -> B -> C
GONE_WITHIN_S = 3.0  # the bound of the waits; the figure measured is printed


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = Path(tmp_path_factory.mktemp("a2a-cascade")) / "conclave.toml"
    path.write_text(
        "".join(
            f'[[a2a_agent]]\nname = "{name}"\ntenant = "{TENANT}"\nlease_s = 6\n\n'
            for name in _CHAIN
        )
    )
    return path


@pytest.fixture(scope="module")
def replica(redis_url: str, config: Path, docker_engine: str) -> Iterator[EmbeddedStack]:
    with EmbeddedStack(e2e_settings(redis_url, "docker", config=config)) as running:
        yield running


@pytest.fixture(scope="module")
def other_replica(redis_url: str, config: Path, replica: EmbeddedStack) -> Iterator[EmbeddedStack]:
    with EmbeddedStack(e2e_settings(redis_url, "docker", config=config)) as running:
        yield running


def _token(stack: EmbeddedStack, agent: str) -> str:
    """Each agent may delegate to the next and run shell commands (so it may hand that on)."""
    scopes = ["tool:run_shell"]
    if agent in _CHAIN[:-1]:
        scopes.append(f"agent:{_CHAIN[_CHAIN.index(agent) + 1]}")
    return stack.token(TENANT, agent, scopes)


@asynccontextmanager
async def _three_workers(
    stack: EmbeddedStack, marker: str, seen: dict[str, WorkItem]
) -> AsyncIterator[None]:
    """A delegates its task's text to B, B to C, and C sleeps in its sandbox."""
    stop = anyio.Event()
    async with (
        GatewayClient(stack.url, _token(stack, "lead")) as a,
        GatewayClient(stack.url, _token(stack, "drafter")) as b,
        GatewayClient(stack.url, _token(stack, "runner")) as c,
        anyio.create_task_group() as group,
    ):

        def passing_on(name: str, client: GatewayClient, onward: str) -> Any:
            async def handle(item: WorkItem) -> str:
                seen[name] = item
                return (await client.delegate(onward, item.text)).text

            return handle

        async def sleep_in_sandbox(item: WorkItem) -> str:
            seen["runner"] = item
            await c.call_tool("run_shell", {"command": f"sleep {marker}"})
            return "slept"

        group.start_soon(lambda: serve_a2a(a, "lead", passing_on("lead", a, "drafter"), stop=stop))
        group.start_soon(
            lambda: serve_a2a(b, "drafter", passing_on("drafter", b, "runner"), stop=stop)
        )
        group.start_soon(lambda: serve_a2a(c, "runner", sleep_in_sandbox, stop=stop))
        await _warm(stack)
        yield
        stop.set()


async def _warm(stack: EmbeddedStack) -> None:
    """C's sandbox started before the clock matters (a cold container takes seconds)."""
    headers = {"Authorization": f"Bearer {_token(stack, 'runner')}"}
    async with httpx.AsyncClient(base_url=stack.url, headers=headers, timeout=60) as http:
        answer = await http.post(
            "/v1/tools/run_shell/call", json={"arguments": {"command": "true"}}
        )
    assert answer.status_code == 200, answer.text


def _marker() -> str:
    """A sleep of 60 s whose argument no other process on this machine has."""
    return f"60.{random.randrange(10**9):09d}"


def _caller(stack: EmbeddedStack) -> httpx.AsyncClient:
    agent = f"top{uuid.uuid4().hex[:6]}"
    token = stack.token(f"t-{agent}", agent, ["agent:lead", "tool:run_shell"])  # handed on
    headers = {"Authorization": f"Bearer {token}", "A2A-Version": "1.0"}
    return httpx.AsyncClient(base_url=stack.url, headers=headers, timeout=60)


def _send(text: str, **params: Any) -> dict[str, Any]:
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": text}]}
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": message, **params},
    }


def _rpc(method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 2, "method": method, "params": params}


async def _wait_until(check: Callable[[], bool], within_s: float, what: str) -> float:
    began = time.monotonic()
    while not check():
        assert time.monotonic() - began < within_s, f"{what}: not within {within_s} s"
        await anyio.sleep(0.005)
    return time.monotonic() - began


async def _tasks_of(stack: EmbeddedStack, delegator: str, agent: str) -> list[dict[str, Any]]:
    """The tasks `delegator`'s worker created at `agent` (its own ListTasks)."""
    headers = {"Authorization": f"Bearer {_token(stack, delegator)}", "A2A-Version": "1.0"}
    async with httpx.AsyncClient(base_url=stack.url, headers=headers, timeout=30) as http:
        listed = await http.post(f"/a2a/{agent}", json=_rpc("ListTasks"))
    tasks: list[dict[str, Any]] = listed.json()["result"]["tasks"]
    return tasks


_ENDED = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED"}


async def _ended_as(
    stack: EmbeddedStack,
    delegator: str,
    agent: str,
    task_id: str,
    within_s: float,
    states: set[str] | None = None,
) -> dict[str, Any]:
    """The task once it is in one of `states` (by default, CANCELED)."""
    states = states or {"TASK_STATE_CANCELED"}
    with anyio.fail_after(within_s):
        while True:
            for task in await _tasks_of(stack, delegator, agent):
                if task["id"] == task_id and task["status"]["state"] in states:
                    return task
            await anyio.sleep(0.05)


async def test_cancelling_a_on_another_replica_cancels_b_c_and_cs_tool_process(
    replica: EmbeddedStack, other_replica: EmbeddedStack
) -> None:
    marker = _marker()
    seen: dict[str, WorkItem] = {}
    async with _three_workers(replica, marker, seen), _caller(replica) as caller:
        created = await caller.post(
            "/a2a/lead", json=_send("go", configuration={"returnImmediately": True})
        )
        task_id = created.json()["result"]["task"]["id"]
        await _wait_until(lambda: bool(processes_with(marker)), 30, "C's tool process started")
        b_task, c_task = seen["drafter"].task_id, seen["runner"].task_id
        async with httpx.AsyncClient(
            base_url=other_replica.url, headers=caller.headers, timeout=30
        ) as elsewhere:
            began = time.monotonic()
            cancelled = await elsewhere.post("/a2a/lead", json=_rpc("CancelTask", id=task_id))
            assert cancelled.json()["result"]["status"]["state"] == "TASK_STATE_CANCELED"
        await _wait_until(lambda: not processes_with(marker), GONE_WITHIN_S, "C's tool gone")
        gone_ms = (time.monotonic() - began) * 1000
        b = await _ended_as(replica, "lead", "drafter", b_task, 5)
        c = await _ended_as(replica, "drafter", "runner", c_task, 5)
    print(f"cancel on the other replica to C's tool process gone: {gone_ms:.0f} ms")
    for task, hop in ((b, "drafter"), (c, "runner")):
        serf = task["status"]["message"]["metadata"]["serf"]
        assert serf["code"] == "CANCELLED" and serf["details"]["hop"] == hop
        assert f"lead/{task_id}" in serf["message"]  # it names the task it was done for


async def test_the_callers_client_going_away_cancels_the_chain(replica: EmbeddedStack) -> None:
    """The caller waits on SendMessage and closes its connection: nobody waits for A's task,
    so it is cancelled, and B's, C's and C's tool process with it."""
    marker = _marker()
    seen: dict[str, WorkItem] = {}
    async with _three_workers(replica, marker, seen), _caller(replica) as caller:
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: caller.post("/a2a/lead", json=_send("wait for me")))
            await _wait_until(lambda: bool(processes_with(marker)), 30, "C's tool started")
            began = time.monotonic()
            group.cancel_scope.cancel()  # the caller's connection closes
        await _wait_until(lambda: not processes_with(marker), GONE_WITHIN_S, "C's tool gone")
        gone_ms = (time.monotonic() - began) * 1000
        await _ended_as(replica, "lead", "drafter", seen["drafter"].task_id, 5)
        await _ended_as(replica, "drafter", "runner", seen["runner"].task_id, 5)
    print(f"the caller gone to C's tool process gone: {gone_ms:.0f} ms")


async def test_b_and_c_stop_at_as_deadline_and_so_does_cs_tool(replica: EmbeddedStack) -> None:
    """Every hop works under A's deadline: C's tool is stopped by it (killed at its grant, or
    refused at once when ATBA's window for run_shell already says a sleep runs past the time
    left, as earlier cancelled sleeps teach it), and A answers by it."""
    marker = _marker()
    seen: dict[str, WorkItem] = {}
    async with _three_workers(replica, marker, seen), _caller(replica) as caller:
        deadline = int(time.time() * 1000) + 4000
        answer = await caller.post(
            "/a2a/lead", json=_send("in time"), headers={"X-Conclave-Deadline": str(deadline)}
        )
        answered_ms = time.time() * 1000 - deadline
        task = answer.json()["result"]["task"]
        assert task["status"]["state"] in _ENDED, answer.text
        await _wait_until(lambda: not processes_with(marker), GONE_WITHIN_S, "C's tool gone")
        gone_ms = time.time() * 1000 - deadline
        b = await _ended_as(replica, "lead", "drafter", seen["drafter"].task_id, 2, _ENDED)
        c = await _ended_as(replica, "drafter", "runner", seen["runner"].task_id, 2, _ENDED)
        ended_ms = time.time() * 1000 - deadline
    print(f"against A's deadline: A answered at {answered_ms:+.0f} ms, C's tool gone at")
    print(f"{gone_ms:+.0f} ms, B's and C's tasks seen ended at {ended_ms:+.0f} ms")
    # Every hop knew its share of A's deadline: each earlier than the hop before it.
    known = [seen[name].deadline_ms or 0 for name in _CHAIN]
    assert deadline - 1000 < known[2] < known[1] < known[0] < deadline, known
    assert answered_ms < 500 and gone_ms < 500 and ended_ms < 1000
    assert b["status"]["state"] in _ENDED and c["status"]["state"] in _ENDED
