"""A delegation's share of its caller's deadline (ATBA), end to end over two hops: a caller
asks hosted agent `planner` (A), whose SDK worker delegates to hosted agent `writer` (B).
A real gateway under uvicorn on a real Redis; the workers are the SDK's (`serve_a2a`).

Each hop is told a deadline no later than what its caller may give it: the caller's deadline
less its reserve and the answer's margin; a hop that overruns it is ended DEADLINE_EXCEEDED
and its worker stopped, before the caller's own deadline; a share that cannot fit is refused
before any task is made.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from agents import Delegated, GatewayClient, WorkItem, serve_a2a
from conclave.stack import EmbeddedStack
from tests.e2e.conftest import e2e_settings

pytestmark = pytest.mark.anyio

TENANT = "t-share"
Handler = Callable[[WorkItem], Awaitable[str]]


@pytest.fixture(scope="module")
def stack(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedStack]:
    config = Path(tmp_path_factory.mktemp("a2a-share")) / "conclave.toml"
    config.write_text(
        "".join(
            f'[[a2a_agent]]\nname = "{name}"\ntenant = "{TENANT}"\nlease_s = 3\n\n'
            for name in ("planner", "writer")
        )
    )
    with EmbeddedStack(e2e_settings(redis_url, "process", config=config)) as running:
        yield running


@asynccontextmanager
async def _two_hops(stack: EmbeddedStack, a: Handler, b: Handler) -> AsyncIterator[GatewayClient]:
    """`planner` served by `a` (given the client it delegates with), `writer` by `b`."""
    stop = anyio.Event()
    a_token = stack.token(TENANT, "planner", ["agent:writer"])
    async with (
        GatewayClient(stack.url, a_token) as planner,
        GatewayClient(stack.url, stack.token(TENANT, "writer", [])) as writer,
        anyio.create_task_group() as group,
    ):
        group.start_soon(lambda: serve_a2a(planner, "planner", a, stop=stop))
        group.start_soon(lambda: serve_a2a(writer, "writer", b, stop=stop))
        yield planner
        stop.set()


def _caller(stack: EmbeddedStack, agent_name: str = "planner") -> httpx.AsyncClient:
    agent = f"c{uuid.uuid4().hex[:8]}"
    token = stack.token(f"t-{agent}", agent, [f"agent:{agent_name}"])
    headers = {"Authorization": f"Bearer {token}", "A2A-Version": "1.0"}
    return httpx.AsyncClient(base_url=stack.url, headers=headers, timeout=30)


def _send(text: str) -> dict[str, Any]:
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": text}]}
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}


def _budget(deadline_ms: int, reserve_ms: int) -> dict[str, str]:
    return {"X-Conclave-Deadline": str(deadline_ms), "X-Conclave-Reserve": str(reserve_ms)}


async def _writer_tasks(stack: EmbeddedStack) -> list[dict[str, Any]]:
    """The tasks planner's worker created at writer (its own ListTasks)."""
    headers = {
        "Authorization": f"Bearer {stack.token(TENANT, 'planner', ['agent:writer'])}",
        "A2A-Version": "1.0",
    }
    async with httpx.AsyncClient(base_url=stack.url, headers=headers, timeout=30) as http:
        body = {"jsonrpc": "2.0", "id": 2, "method": "ListTasks", "params": {}}
        listed = await http.post("/a2a/writer", json=body)
    tasks: list[dict[str, Any]] = listed.json()["result"]["tasks"]
    return tasks


async def test_each_hop_is_told_no_more_than_its_callers_share(stack: EmbeddedStack) -> None:
    seen: dict[str, int | None] = {}

    async def writer(item: WorkItem) -> str:
        seen["writer"] = item.deadline_ms
        return "written"

    async with _caller(stack) as caller:

        async def planner(item: WorkItem) -> str:
            seen["planner"] = item.deadline_ms
            return (await client.delegate("writer", item.text)).text

        async with _two_hops(stack, planner, writer) as client:
            deadline = int(time.time() * 1000) + 20_000
            answer = await caller.post(
                "/a2a/planner", json=_send("draft"), headers=_budget(deadline, 5_000)
            )
    task = answer.json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", answer.text
    a, b = seen["planner"], seen["writer"]
    assert a is not None and b is not None
    # A keeps back nothing the caller kept: its deadline leaves the caller's 5 s reserve, and
    # it is the rest of the time (no later call is planned), less the answer's margin.
    assert deadline - 5_000 - 1_000 < a < deadline - 5_000
    # B is told A's share less its own answer's margin: never A's deadline itself.
    assert a - 1_000 < b < a


async def test_an_overrun_ends_deadline_exceeded_and_leaves_nothing_running(
    stack: EmbeddedStack,
) -> None:
    """B sleeps past its deadline, and A past its own once B's answer came: each is ended
    DEADLINE_EXCEEDED at its share, before the caller's deadline, and each worker is stopped."""
    stopped = {"planner": anyio.Event(), "writer": anyio.Event()}
    from_b: list[Delegated] = []

    async def writer(item: WorkItem) -> str:
        try:
            await anyio.sleep_forever()
        finally:
            stopped["writer"].set()
        return "never"

    async with _caller(stack) as caller:

        async def planner(item: WorkItem) -> str:
            try:
                from_b.append(await client.delegate("writer", item.text))
                await anyio.sleep_forever()  # still working on it when its share runs out
            finally:
                stopped["planner"].set()
            return "never"

        async with _two_hops(stack, planner, writer) as client:
            deadline = int(time.time() * 1000) + 4_000
            answer = await caller.post(
                "/a2a/planner", json=_send("too long"), headers=_budget(deadline, 1_500)
            )
            answered_ms = time.time() * 1000
            with anyio.fail_after(5):
                for event in stopped.values():
                    await event.wait()
            b_tasks = await _writer_tasks(stack)
    task = answer.json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_CANCELED", answer.text
    serf = task["status"]["message"]["metadata"]["serf"]
    assert serf["code"] == "DEADLINE_EXCEEDED" and serf["details"]["hop"] == "planner"
    assert answered_ms < deadline  # the caller has its reserve left
    b = from_b[0]  # what A saw of B: ended at B's own, earlier, share
    assert b.state == "TASK_STATE_CANCELED"
    b_serf = b.raw["status"]["message"]["metadata"]["serf"]
    assert b_serf["code"] == "DEADLINE_EXCEEDED" and b_serf["details"]["hop"] == "writer"
    assert [t["status"]["state"] for t in b_tasks if t["id"] == b.task_id] == [
        "TASK_STATE_CANCELED"
    ]


async def test_a_share_that_cannot_fit_is_refused_before_any_task(stack: EmbeddedStack) -> None:
    """The caller keeps back more than is left: the delegation is BUDGET_EXHAUSTED, as a tool
    call would be, and no task is made for it."""
    ran: list[WorkItem] = []

    async def never(item: WorkItem) -> str:
        ran.append(item)
        return "ran"

    async with _caller(stack) as caller, _two_hops(stack, never, never):
        deadline = int(time.time() * 1000) + 2_000
        answer = await caller.post(
            "/a2a/planner", json=_send("no room"), headers=_budget(deadline, 5_000)
        )
        listed = await caller.post(
            "/a2a/planner", json={"jsonrpc": "2.0", "id": 3, "method": "ListTasks", "params": {}}
        )
    error = answer.json()["error"]
    serf = next(d for d in error["data"] if str(d.get("@type", "")).endswith("SerfError"))
    assert serf["code"] == "BUDGET_EXHAUSTED" and "reserve" in serf["message"]
    assert listed.json()["result"]["tasks"] == [] and ran == []


async def test_a_delegation_learns_its_agents_time_and_is_not_started_without_it(
    stack: EmbeddedStack,
) -> None:
    """Delegations to `writer` under a deadline that took about a second teach the caller's
    tenant its window
    (`a2a:writer`): with less than that left, the next is refused BUDGET_EXHAUSTED before a
    task is made, as a tool call would be; a caller with no such window is not refused on a
    guess (its task starts, and ends at its deadline)."""
    ran: list[WorkItem] = []

    async def writer(item: WorkItem) -> str:
        ran.append(item)
        await anyio.sleep(1.0)
        return "written"

    async with _two_hops(stack, writer, writer), _caller(stack, "writer") as taught:
        for _ in range(6):  # more than the window needs (latency_min_samples, 5)
            roomy = _budget(int(time.time() * 1000) + 30_000, 0)  # timed under a deadline
            done = await taught.post("/a2a/writer", json=_send("learn"), headers=roomy)
            assert done.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        taught_runs = len(ran)
        headers = _budget(int(time.time() * 1000) + 600, 0)
        refused = await taught.post("/a2a/writer", json=_send("in 600 ms"), headers=headers)
        assert len(ran) == taught_runs  # nothing started for it
        async with _caller(stack, "writer") as fresh:
            headers = _budget(int(time.time() * 1000) + 600, 0)
            started = await fresh.post("/a2a/writer", json=_send("in 600 ms"), headers=headers)
    serf = next(d for d in refused.json()["error"]["data"] if "code" in d)
    assert serf["code"] == "BUDGET_EXHAUSTED" and "a2a:writer" in serf["message"], serf
    assert serf["details"]["samples"] >= 5 and serf["details"]["p50_ms"] >= 1000
    task = started.json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_CANCELED", started.text
    assert task["status"]["message"]["metadata"]["serf"]["code"] == "DEADLINE_EXCEEDED"
