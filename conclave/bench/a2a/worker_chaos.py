"""A worker killed mid-task, again and again: hosted agent `chaos` (idempotent, lease
`LEASE_S`) served by two worker processes (the SDK's `serve_a2a`, this module run as a
script), the one running each task killed with SIGKILL at a random point of its run and
another started in its place.

Each round sends one task (`returnImmediately`). Its handler marks its start (a file named
after the task and its process), works for `WORK_S` and answers with two artifacts (the SDK
writes the first while the task works, the second with the answer). Once a worker has started
the task, the bench waits a random time within the
handler's run and kills it; the other worker (the lease lapsed, the sweep gave the task back:
the agent is idempotent) runs it again. Measured: from the kill to the other worker's start
(goal: within the lease plus 1 s). Checked once every round has ended, from the task's own
records in Redis: it ended exactly once (one final status on its event stream), COMPLETED,
holding each of its two artifacts exactly once.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import redis

from agents import Artifact, GatewayClient, Reply, WorkItem, serve_a2a
from conclave.stack import EmbeddedStack

AGENT = "chaos"
TENANT = "bench-chaos"
LEASE_S = 1.0
WORK_S = 0.3  # each run of the handler
RESUME_GOAL_S = LEASE_S + 1.0
_ENDED = ("TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED")
_WITHIN_S = 30.0


def chaos_config() -> str:
    return (
        f'[[a2a_agent]]\nname = "{AGENT}"\ntenant = "{TENANT}"\n'
        f"idempotent = true\nlease_s = {LEASE_S}\n"
    )


@dataclass
class ChaosSamples:
    rounds: int
    resumed_s: list[float] = field(default_factory=list)  # kill -> the other worker's start
    ended_after_kill: int = 0  # killed after its answer landed: nothing left to resume
    faults: list[str] = field(default_factory=list)  # a task not ended once, or an artifact off

    @property
    def exactly_once(self) -> bool:
        return not self.faults

    @property
    def resumed_in_time(self) -> bool:
        return all(s <= RESUME_GOAL_S for s in self.resumed_s)


class _Workers:
    """Two worker processes, each marking in `marks` which tasks it started."""

    def __init__(self, stack: EmbeddedStack, marks: Path) -> None:
        self.stack = stack
        self.marks = marks
        self.running: list[subprocess.Popen[bytes]] = []

    def start(self) -> None:
        token = self.stack.token(TENANT, AGENT, [])
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "conclave.bench.a2a.worker_chaos",
                self.stack.url,
                str(self.marks),
            ],
            env={**os.environ, "CONCLAVE_TOKEN": token},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.running.append(worker)

    def ready(self) -> bool:
        return all((self.marks / f"ready.{w.pid}").exists() for w in self.running)

    def holder(self, task_id: str) -> subprocess.Popen[bytes] | None:
        for worker in self.running:
            if (self.marks / f"{task_id}.{worker.pid}").exists():
                return worker
        return None

    def kill(self, worker: subprocess.Popen[bytes]) -> None:
        worker.send_signal(signal.SIGKILL)
        worker.wait()
        self.running.remove(worker)

    def stop(self) -> None:
        for worker in self.running:
            worker.terminate()
            worker.wait(10)


async def _until(check: Any) -> Any:
    with anyio.fail_after(_WITHIN_S):
        while not (found := check()):  # noqa: ASYNC110 (other processes' files: no event)
            await anyio.sleep(0.005)
        return found


async def _round(caller: httpx.AsyncClient, workers: _Workers, samples: ChaosSamples) -> str:
    await _until(workers.ready)
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "go"}]}
    send = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": message, "configuration": {"returnImmediately": True}},
    }
    task_id = str((await caller.post(f"/a2a/{AGENT}", json=send)).json()["result"]["task"]["id"])
    first = await _until(lambda: workers.holder(task_id))
    await anyio.sleep(random.uniform(0, WORK_S * 1.1))
    workers.kill(first)
    killed = time.monotonic()
    workers.start()  # the replacement stands by: the survivor takes the task
    state = await _state(caller, task_id)
    if state in _ENDED:
        samples.ended_after_kill += 1
    else:
        await _until(lambda: workers.holder(task_id))
        samples.resumed_s.append(time.monotonic() - killed)
    return task_id


async def _state(caller: httpx.AsyncClient, task_id: str) -> str:
    get = {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task_id}}
    return str((await caller.post(f"/a2a/{AGENT}", json=get)).json()["result"]["status"]["state"])


async def _measure(stack: EmbeddedStack, rounds: int, marks: Path) -> ChaosSamples:
    token = stack.token("bench", f"chaos-{uuid.uuid4().hex[:6]}", [f"agent:{AGENT}"])
    headers = {"Authorization": f"Bearer {token}", "A2A-Version": "1.0"}
    samples = ChaosSamples(rounds)
    workers = _Workers(stack, marks)
    try:
        workers.start()
        workers.start()
        async with httpx.AsyncClient(base_url=stack.url, headers=headers, timeout=60) as caller:
            task_ids = [await _round(caller, workers, samples) for _ in range(rounds)]
            for task_id in task_ids:
                with anyio.fail_after(_WITHIN_S):
                    while await _state(caller, task_id) not in _ENDED:  # noqa: ASYNC110
                        await anyio.sleep(0.02)
                samples.faults += await _faults(caller, stack, task_id)
    finally:
        workers.stop()
    return samples


async def _faults(caller: httpx.AsyncClient, stack: EmbeddedStack, task_id: str) -> list[str]:
    get = {"jsonrpc": "2.0", "id": 4, "method": "GetTask", "params": {"id": task_id}}
    task = (await caller.post(f"/a2a/{AGENT}", json=get)).json()["result"]
    faults = []
    if task["status"]["state"] != "TASK_STATE_COMPLETED":
        faults.append(f"{task_id}: {task['status']['state']}")
    texts = [a["parts"][0]["text"] for a in task.get("artifacts", [])]
    if sorted(texts) != ["part-1", "part-2"]:
        faults.append(f"{task_id}: artifacts {texts}")
    # The task's event stream (gateway.a2a.hosted_tasks' key layout): one final status.
    assert stack.settings.redis_url is not None  # the stack runs on it
    with redis.Redis.from_url(stack.settings.redis_url, decode_responses=True) as store:
        events = store.xrange(f"conclave:{{a2a:{AGENT}}}:e:{task_id}")
    finals = sum(1 for _, fields in events if any(s in fields.get("status", "") for s in _ENDED))
    if finals != 1:
        faults.append(f"{task_id}: ended {finals} times")
    return faults


def chaos_samples(stack: EmbeddedStack, rounds: int, marks: Path) -> ChaosSamples:
    """`rounds` tasks of `stack` (which serves `chaos_config()`), each one's worker killed."""
    marks.mkdir(parents=True, exist_ok=True)
    return anyio.run(_measure, stack, rounds, marks)


# --- a worker process -----------------------------------------------------------------------


async def _serve(url: str, marks: Path, token: str) -> None:
    async with GatewayClient(url, token) as client:

        async def handle(item: WorkItem) -> Reply:
            (marks / f"{item.task_id}.{os.getpid()}").touch()
            await anyio.sleep(WORK_S)
            return Reply("done", artifacts=(Artifact.text("part-1"), Artifact.text("part-2")))

        (marks / f"ready.{os.getpid()}").touch()
        await serve_a2a(client, AGENT, handle)


if __name__ == "__main__":
    anyio.run(_serve, sys.argv[1], Path(sys.argv[2]), os.environ["CONCLAVE_TOKEN"])
