"""Hosted A2A agents (`[[a2a_agent]]` without a url), end to end: two gateway replicas under
uvicorn in their own processes on one real Redis, workers pulling tasks with the SDK
(`serve_a2a`) or by hand over HTTP, callers over plain JSON-RPC, HTTP+JSON and
`GatewayClient.delegate`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from agents import Agent, GatewayClient, Reply, ScriptedModel, WorkItem, serve_a2a
from conclave.stack import EmbeddedStack
from tests.e2e.conftest import e2e_settings

pytestmark = pytest.mark.anyio

HOST_TENANT = "t-host"
# One agent per test: a test's leftovers never reach another test's workers.
_AGENTS = {
    "helper": "lease_s = 3",
    "steady": "lease_s = 1\nidempotent = true",
    "fragile": "lease_s = 1",
    "stoppable": "lease_s = 1.5",
    "late": "lease_s = 1.5",
    "relay": "lease_s = 3",
    "assistant": "",
    "cli": "",
}


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = Path(tmp_path_factory.mktemp("a2a-hosted")) / "conclave.toml"
    path.write_text(
        "".join(
            f'[[a2a_agent]]\nname = "{name}"\ntenant = "{HOST_TENANT}"\n'
            f'description = "The {name} agent"\n{extra}\n\n'
            for name, extra in _AGENTS.items()
        )
    )
    return path


@pytest.fixture(scope="module")
def replica(redis_url: str, config: Path) -> Iterator[EmbeddedStack]:
    with EmbeddedStack(e2e_settings(redis_url, "process", config=config)) as running:
        yield running


@pytest.fixture(scope="module")
def other_replica(redis_url: str, config: Path, replica: EmbeddedStack) -> Iterator[EmbeddedStack]:
    """A second gateway on the same Redis (the same secret: a token works on both)."""
    with EmbeddedStack(e2e_settings(redis_url, "process", config=config)) as running:
        yield running


def _caller(stack: EmbeddedStack, agent_name: str, tenant: str = "") -> httpx.AsyncClient:
    agent = f"c{uuid.uuid4().hex[:8]}"
    token = stack.token(tenant or f"t-{agent}", agent, [f"agent:{agent_name}"])
    headers = {"Authorization": f"Bearer {token}", "A2A-Version": "1.0"}
    return httpx.AsyncClient(base_url=stack.url, headers=headers, timeout=30)


def _worker_http(stack: EmbeddedStack, name: str, tenant: str = HOST_TENANT) -> httpx.AsyncClient:
    """A worker by hand: the hosted agent's own token."""
    headers = {"Authorization": f"Bearer {stack.token(tenant, name, [])}"}
    return httpx.AsyncClient(base_url=stack.url, headers=headers, timeout=30)


@asynccontextmanager
async def _serving(
    stack: EmbeddedStack, name: str, handle: Callable[[WorkItem], Awaitable[str | Reply]]
) -> AsyncIterator[None]:
    """An SDK worker serving `name` while the block runs."""
    stop = anyio.Event()
    token = stack.token(HOST_TENANT, name, [])
    async with GatewayClient(stack.url, token) as client, anyio.create_task_group() as group:
        group.start_soon(lambda: serve_a2a(client, name, handle, stop=stop))
        yield
        stop.set()


def _send(
    text: str, method: str = "SendMessage", task_id: str | None = None, **params: Any
) -> dict[str, Any]:
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": text}]}
    if task_id is not None:
        message["taskId"] = task_id
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": message, **params}}


def _rpc(method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}


def _at_once(text: str) -> dict[str, Any]:
    return _send(text, configuration={"returnImmediately": True})


async def _task_when(
    caller: httpx.AsyncClient, name: str, task_id: str, states: set[str], within_s: float = 10
) -> dict[str, Any]:
    """The task once its state is one of `states` (asked again until `within_s` passed)."""
    with anyio.fail_after(within_s):
        while True:
            task = (await caller.post(f"/a2a/{name}", json=_rpc("GetTask", id=task_id))).json()
            if task["result"]["status"]["state"] in states:
                return dict(task["result"])
            await anyio.sleep(0.05)


def _text(task: dict[str, Any]) -> str:
    return str(task["status"]["message"]["parts"][0]["text"])


async def test_a_worker_serves_the_agent_to_json_rpc_and_to_delegate(
    replica: EmbeddedStack,
) -> None:
    """The worker connects out and pulls; the caller's SendMessage waits for its answer. The
    worker sees who asked; the card is the gateway's, built from the declaration."""

    async def greet(item: WorkItem) -> str:
        return f"{item.caller.agent} asked: {item.text}"

    async with httpx.AsyncClient(base_url=replica.url) as anonymous:
        card = (await anonymous.get("/a2a/helper/.well-known/agent-card.json")).json()
    assert card["description"] == "The helper agent"
    assert card["capabilities"] == {"streaming": True, "pushNotifications": False}
    assert {i["url"] for i in card["supportedInterfaces"]} == {
        f"{replica.url}/a2a/helper",
        f"{replica.url}/a2a/helper/rest",
    }
    async with _serving(replica, "helper", greet), _caller(replica, "helper") as caller:
        answer = (await caller.post("/a2a/helper", json=_send("hello"))).json()["result"]["task"]
        assert answer["status"]["state"] == "TASK_STATE_COMPLETED"
        assert _text(answer).endswith("asked: hello")
        over_rest = await caller.post("/a2a/helper/rest/message:send", json=_send("rest")["params"])
        assert _text(over_rest.json()["task"]).endswith("asked: rest")
        agent = f"d{uuid.uuid4().hex[:8]}"
        token = replica.token(f"t-{agent}", agent, ["agent:helper"])
        async with GatewayClient(replica.url, token) as delegating:
            reply = await delegating.delegate("helper", "from the SDK")
        assert reply.text == f"{agent} asked: from the SDK"
        assert reply.state == "TASK_STATE_COMPLETED"


async def test_only_the_agent_itself_may_serve_it(replica: EmbeddedStack) -> None:
    async with _worker_http(replica, "helper", tenant="t-other") as impostor:
        refused = await impostor.post("/v1/a2a/helper/work/next", params={"wait_s": 0})
    assert refused.status_code == 403 and refused.json()["code"] == "AGENT_NOT_ALLOWED"
    async with _worker_http(replica, "steady") as other_agent:
        refused = await other_agent.post("/v1/a2a/helper/work/next", params={"wait_s": 0})
    assert refused.status_code == 403 and refused.json()["code"] == "AGENT_NOT_ALLOWED"


async def test_a_task_answers_only_to_its_creator(replica: EmbeddedStack) -> None:
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    async with (
        _caller(replica, "fragile", tenant) as owner,
        _caller(replica, "fragile", tenant) as other,
    ):
        created = (await owner.post("/a2a/fragile", json=_at_once("mine"))).json()["result"]
        task_id = created["task"]["id"]
        assert created["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
        got = (await other.post("/a2a/fragile", json=_rpc("GetTask", id=task_id))).json()
        assert got["error"]["code"] == -32001
        cancel = await other.post(f"/a2a/fragile/rest/tasks/{task_id}:cancel", json={})
        assert cancel.status_code == 404
        theirs = (await other.post("/a2a/fragile", json=_rpc("ListTasks"))).json()["result"]
        assert task_id not in [t["id"] for t in theirs["tasks"]]
        mine = (await owner.post("/a2a/fragile", json=_rpc("ListTasks"))).json()["result"]
        assert task_id in [t["id"] for t in mine["tasks"]]
        cancelled = await owner.post(f"/a2a/fragile/rest/tasks/{task_id}:cancel", json={})
        assert cancelled.json()["status"]["state"] == "TASK_STATE_CANCELED"


async def test_an_idempotent_task_goes_to_another_worker_and_the_first_is_fenced(
    replica: EmbeddedStack,
) -> None:
    async with (
        _caller(replica, "steady") as caller,
        _worker_http(replica, "steady") as first,
        _worker_http(replica, "steady") as second,
    ):
        created = (await caller.post("/a2a/steady", json=_at_once("once"))).json()["result"]
        task_id = created["task"]["id"]
        claimed = await first.post("/v1/a2a/steady/work/next", params={"wait_s": 5})
        assert claimed.status_code == 200 and claimed.json()["task_id"] == task_id
        # The first worker stops writing; its lease (1 s) lapses and the second claims it.
        taken = await second.post("/v1/a2a/steady/work/next", params={"wait_s": 10})
        assert taken.status_code == 200 and taken.json()["task_id"] == task_id
        assert taken.json()["token"] > claimed.json()["token"]
        # The first worker wakes up while the second works on it: its write is refused.
        late = await first.post(
            f"/v1/a2a/steady/work/{task_id}",
            json={"token": claimed.json()["token"], "state": "TASK_STATE_FAILED"},
        )
        assert late.status_code == 409 and late.json()["code"] == "FENCED"
        working = await _task_when(caller, "steady", task_id, {"TASK_STATE_WORKING"})
        assert "message" not in working["status"]
        done = await second.post(
            f"/v1/a2a/steady/work/{task_id}",
            json={
                "token": taken.json()["token"],
                "state": "TASK_STATE_COMPLETED",
                "message": _said("second: once"),
            },
        )
        assert done.status_code == 200 and done.json()["cancelled"] is False
        after = await _task_when(caller, "steady", task_id, {"TASK_STATE_COMPLETED"})
        assert _text(after) == "second: once"


async def test_an_sdk_worker_takes_over_a_task_whose_worker_went_quiet(
    replica: EmbeddedStack,
) -> None:
    async with _caller(replica, "steady") as caller, _worker_http(replica, "steady") as quiet:
        created = (await caller.post("/a2a/steady", json=_at_once("again"))).json()["result"]
        task_id = created["task"]["id"]
        claimed = await quiet.post("/v1/a2a/steady/work/next", params={"wait_s": 5})
        assert claimed.json()["task_id"] == task_id
        async with _serving(replica, "steady", lambda item: _answer(f"sdk: {item.text}")):
            done = await _task_when(caller, "steady", task_id, {"TASK_STATE_COMPLETED"})
        assert _text(done) == "sdk: again"


def _said(text: str) -> dict[str, Any]:
    return {"messageId": uuid.uuid4().hex, "role": "ROLE_AGENT", "parts": [{"text": text}]}


async def _answer(text: str) -> str:
    return text


async def test_a_task_whose_worker_died_fails_with_serf_when_not_idempotent(
    replica: EmbeddedStack,
) -> None:
    async with _caller(replica, "fragile") as caller, _worker_http(replica, "fragile") as dead:
        task_id = (await caller.post("/a2a/fragile", json=_at_once("x"))).json()["result"]["task"][
            "id"
        ]
        claimed = await dead.post("/v1/a2a/fragile/work/next", params={"wait_s": 5})
        assert claimed.json()["task_id"] == task_id
        # The worker writes nothing more: its lease (1 s) lapses and the sweep fails the task.
        failed = await _task_when(caller, "fragile", task_id, {"TASK_STATE_FAILED"})
        serf = failed["status"]["message"]["metadata"]["serf"]
        assert serf["code"] == "UPSTREAM_UNAVAILABLE"
        assert serf["details"] == {"hop": "fragile", "reason": "lease_lapsed"}
        late = await dead.post(
            f"/v1/a2a/fragile/work/{task_id}",
            json={"token": claimed.json()["token"], "state": "TASK_STATE_COMPLETED"},
        )
        assert late.status_code == 409 and late.json()["code"] == "FENCED"
        # Nobody runs it again: the queue is empty for the next worker.
        empty = await dead.post("/v1/a2a/fragile/work/next", params={"wait_s": 0.3})
        assert empty.status_code == 204


async def test_cancel_task_reaches_the_worker(replica: EmbeddedStack) -> None:
    started, stopped = anyio.Event(), anyio.Event()

    async def forever(item: WorkItem) -> str:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            stopped.set()
        return "never"

    async with _serving(replica, "stoppable", forever), _caller(replica, "stoppable") as caller:
        task_id = (await caller.post("/a2a/stoppable", json=_at_once("go"))).json()["result"][
            "task"
        ]["id"]
        with anyio.fail_after(10):
            await started.wait()
        cancelled = await caller.post("/a2a/stoppable", json=_rpc("CancelTask", id=task_id))
        assert cancelled.json()["result"]["status"]["state"] == "TASK_STATE_CANCELED"
        with anyio.fail_after(5):  # the worker's next heartbeat (a third of 1.5 s) learns it
            await stopped.wait()
        again = await caller.post("/a2a/stoppable", json=_rpc("CancelTask", id=task_id))
        assert again.json()["error"]["code"] == -32002  # TaskNotCancelableError
        task = await _task_when(caller, "stoppable", task_id, {"TASK_STATE_CANCELED"})
        assert "message" not in task["status"]  # the worker's answer never landed


async def test_a_stream_on_another_replica_sees_the_tasks_events(
    replica: EmbeddedStack, other_replica: EmbeddedStack
) -> None:
    """Created on one replica, served by a worker of that replica, subscribed on the other:
    every event comes through Redis."""
    go = anyio.Event()

    async def after_go(item: WorkItem) -> Reply:
        await go.wait()
        return Reply(f"done: {item.text}", artifact="the report")

    agent = f"s{uuid.uuid4().hex[:8]}"
    token = replica.token(f"t-{agent}", agent, ["agent:relay"])
    headers = {"Authorization": f"Bearer {token}", "A2A-Version": "1.0"}
    async with (
        _serving(replica, "relay", after_go),
        httpx.AsyncClient(base_url=replica.url, headers=headers, timeout=30) as first,
        httpx.AsyncClient(base_url=other_replica.url, headers=headers, timeout=30) as second,
    ):
        task_id = (await first.post("/a2a/relay", json=_at_once("stream me"))).json()["result"][
            "task"
        ]["id"]
        events: list[dict[str, Any]] = []
        with anyio.fail_after(15):
            async with second.stream(
                "POST", "/a2a/relay", json=_rpc("SubscribeToTask", id=task_id)
            ) as stream:
                assert stream.headers["content-type"].startswith("text/event-stream")
                async for line in stream.aiter_lines():
                    if line.startswith("data:"):
                        events.append(json.loads(line[5:])["result"])
                        go.set()  # the subscription is open: let the worker answer
        # SendStreamingMessage over HTTP+JSON on the other replica: the task, then its events.
        with anyio.fail_after(15):
            async with second.stream(
                "POST", "/a2a/relay/rest/message:stream", json=_send("twice")["params"]
            ) as stream:
                sent = [
                    json.loads(line[5:])
                    async for line in stream.aiter_lines()
                    if line.startswith("data:")
                ]
    # The stream opens with the task as it is then: queued, or already claimed by the worker
    # (it runs beside the stream and may write first).
    assert sent[0]["task"]["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
    assert sent[-1]["statusUpdate"]["status"]["message"]["parts"][0]["text"] == "done: twice"
    assert events[0]["task"]["id"] == task_id
    artifacts = [e["artifactUpdate"]["artifact"] for e in events if "artifactUpdate" in e]
    assert [a["parts"][0]["text"] for a in artifacts] == ["the report"]
    final = events[-1]["statusUpdate"]
    assert final["taskId"] == task_id and final["status"]["state"] == "TASK_STATE_COMPLETED"
    assert final["status"]["message"]["parts"][0]["text"] == "done: stream me"


async def test_the_callers_deadline_cancels_the_task(replica: EmbeddedStack) -> None:
    seen: list[WorkItem] = []
    stopped = anyio.Event()

    async def slow(item: WorkItem) -> str:
        seen.append(item)
        try:
            await anyio.sleep_forever()
        finally:
            stopped.set()
        return "never"

    async with _serving(replica, "late", slow), _caller(replica, "late") as caller:
        deadline = int(time.time() * 1000) + 1000
        answer = await caller.post(
            "/a2a/late",
            json=_send("take your time"),
            headers={"X-Conclave-Deadline": str(deadline)},
        )
        late_ms = time.time() * 1000 - deadline
        task = answer.json()["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_CANCELED", answer.text
        serf = task["status"]["message"]["metadata"]["serf"]
        assert serf["code"] == "DEADLINE_EXCEEDED" and serf["details"]["hop"] == "late"
        assert late_ms < 400, f"answered {late_ms:.0f} ms past the deadline"
        known = seen[0].deadline_ms  # the worker knew it: its share, the answer's margin less
        assert known is not None and deadline - 1000 < known < deadline
        with anyio.fail_after(5):
            await stopped.wait()  # and was stopped


async def test_a_queued_task_past_its_deadline_is_cancelled_by_the_sweep(
    other_replica: EmbeddedStack,
) -> None:
    """No worker, and nobody waiting on the task: a replica's sweep ends it at the deadline."""
    async with _caller(other_replica, "late") as caller:
        deadline = int(time.time() * 1000) + 500
        headers = {"X-Conclave-Deadline": str(deadline)}
        created = await caller.post("/a2a/late", json=_at_once("unseen"), headers=headers)
        task_id = created.json()["result"]["task"]["id"]
        task = await _task_when(caller, "late", task_id, {"TASK_STATE_CANCELED"}, within_s=5)
    assert time.time() * 1000 - deadline < 1000
    assert task["status"]["message"]["metadata"]["serf"]["code"] == "DEADLINE_EXCEEDED"


async def test_an_input_required_task_resumes_with_the_callers_next_message(
    replica: EmbeddedStack,
) -> None:
    async def ask_first(item: WorkItem) -> Reply:
        if len(item.messages) == 1:
            return Reply("which one?", state="TASK_STATE_INPUT_REQUIRED")
        return Reply(f"you chose {item.text}")

    async with _serving(replica, "helper", ask_first), _caller(replica, "helper") as caller:
        asked = (await caller.post("/a2a/helper", json=_send("pick"))).json()["result"]["task"]
        assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert _text(asked) == "which one?"
        resumed = await caller.post("/a2a/helper", json=_send("the first", task_id=asked["id"]))
        task = resumed.json()["result"]["task"]
        assert task["id"] == asked["id"] and task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert _text(task) == "you chose the first"
        done = await caller.post("/a2a/helper", json=_send("more", task_id=asked["id"]))
        assert done.json()["error"]["code"] == -32004  # UnsupportedOperationError: it ended


async def test_an_agent_serves_itself_with_its_run_as_the_reply(replica: EmbeddedStack) -> None:
    """`Agent.serve_a2a`: a registered SDK agent is the hosted agent of its own name."""
    model = ScriptedModel([], final="forty-two")
    assistant = Agent("assistant", "answers", model, tenant=HOST_TENANT)
    stop = anyio.Event()
    async with (
        GatewayClient(replica.url, admin_key="e2e-admin-key") as admin,
        anyio.create_task_group() as group,
    ):
        await assistant.register(admin)
        group.start_soon(lambda: assistant.serve_a2a(stop=stop))
        async with _caller(replica, "assistant") as caller:
            answer = await caller.post("/a2a/assistant", json=_send("the question"))
            task = answer.json()["result"]["task"]
        stop.set()
    await assistant.aclose()
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert _text(task) == "forty-two"


async def test_the_cli_worker_serves_a_handler_module(
    replica: EmbeddedStack, tmp_path: Path
) -> None:
    """`conclave a2a worker NAME --handler module:function`, in its own process."""
    (tmp_path / "shouting.py").write_text("async def answer(item):\n    return item.text.upper()\n")
    command = [sys.executable, "-m", "conclave", "a2a", "worker", "cli"]
    command += ["--handler", "shouting:answer", "--gateway", replica.url]
    env = {**os.environ, "CONCLAVE_TOKEN": replica.token(HOST_TENANT, "cli", [])}
    quiet = subprocess.DEVNULL
    worker = await anyio.open_process(command, cwd=tmp_path, env=env, stdout=quiet, stderr=quiet)
    async with worker:
        try:
            async with _caller(replica, "cli") as caller:
                answer = await caller.post("/a2a/cli", json=_send("quiet please"))
            task = answer.json()["result"]["task"]
            assert task["status"]["state"] == "TASK_STATE_COMPLETED", answer.text
            assert _text(task) == "QUIET PLEASE"
        finally:
            worker.terminate()
            with anyio.fail_after(10):
                await worker.wait()
