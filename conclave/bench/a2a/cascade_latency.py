"""Three hops of delegation under the gateway's cascade: a caller asks hosted agent `lead` (A),
whose worker delegates to `drafter` (B), whose worker delegates to `runner` (C), whose worker
runs `sleep <unique marker>` in its sandbox. The workers are the SDK's (`serve_a2a`), in this
process, each with its agent's token.

- Cancellation: once C's process runs, the caller cancels A's task (`CancelTask`); the clock
  runs from just before the cancel is sent until the last process with the marker is gone
  (every backend's processes are visible from the host).
- Deadlines: the caller sends with a deadline and waits; a chain violates it when the answer
  comes, or C's process is still alive, more than `DEADLINE_SLACK_MS` after the deadline.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

import anyio
import httpx

from agents import GatewayClient, WorkItem, serve_a2a
from conclave.bench.core import processes_with
from conclave.stack import EmbeddedStack

TENANT = "bench-chain"
CHAIN = ("lead", "drafter", "runner")
DEADLINE_SLACK_MS = 100.0
DEADLINE_MS = 1500  # each deadline chain's, from its send
EARLY_MS = 200.0  # an answer sooner than this before the deadline: refused early, not stopped
_POLL_S = 0.0005
_WITHIN_S = 30.0


def chain_config() -> str:
    """The three hosted agents, as conclave.toml declares them."""
    return "".join(f'[[a2a_agent]]\nname = "{n}"\ntenant = "{TENANT}"\n\n' for n in CHAIN)


@dataclass
class CascadeSamples:
    cancel_to_gone_ms: list[float]
    deadline_chains: int
    deadline_violations: int
    past_deadline_ms: list[float]  # per chain: the later of the answer and C's process gone

    @property
    def ran_to_the_deadline(self) -> int:
        """Chains whose tool ran until the deadline stopped it (the others were refused early:
        ATBA saw the tool could not finish in the time left)."""
        return sum(1 for ms in self.past_deadline_ms if ms > -EARLY_MS)


async def _until(running: bool, marker: str) -> None:
    with anyio.fail_after(_WITHIN_S):
        while bool(processes_with(marker)) != running:  # noqa: ASYNC110 (other processes: no event)
            await anyio.sleep(_POLL_S)


def _token(stack: EmbeddedStack, agent: str) -> str:
    scopes = ["tool:run_shell"]
    if agent in CHAIN[:-1]:
        scopes.append(f"agent:{CHAIN[CHAIN.index(agent) + 1]}")
    return stack.token(TENANT, agent, scopes)


@asynccontextmanager
async def _workers(stack: EmbeddedStack) -> AsyncIterator[None]:
    """A and B pass their task's text on; C sleeps on the marker it is sent."""
    stop = anyio.Event()
    async with (
        GatewayClient(stack.url, _token(stack, "lead")) as a,
        GatewayClient(stack.url, _token(stack, "drafter")) as b,
        GatewayClient(stack.url, _token(stack, "runner")) as c,
        anyio.create_task_group() as group,
    ):

        async def lead(item: WorkItem) -> str:
            return (await a.delegate("drafter", item.text)).text

        async def drafter(item: WorkItem) -> str:
            return (await b.delegate("runner", item.text)).text

        async def runner(item: WorkItem) -> str:
            await c.call_tool("run_shell", {"command": f"sleep {item.text}"})
            return "slept"

        for client, name, handle in (
            (a, "lead", lead),
            (b, "drafter", drafter),
            (c, "runner", runner),
        ):
            group.start_soon(partial(serve_a2a, client, name, handle, stop=stop))
        await c.call_tool("run_shell", {"command": "true"})  # C's sandbox started
        yield
        stop.set()


def _send(text: str, **params: Any) -> dict[str, Any]:
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": text}]}
    params = {"message": message, **params}
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}


def _marker() -> str:
    return f"30.{random.randrange(10**9):09d}"  # a sleep of 30 s no other process has


async def _cancel_once(caller: httpx.AsyncClient) -> float:
    marker = _marker()
    at_once = _send(marker, configuration={"returnImmediately": True})
    task_id = (await caller.post("/a2a/lead", json=at_once)).json()["result"]["task"]["id"]
    await _until(True, marker)
    began = time.perf_counter()
    cancel = {"jsonrpc": "2.0", "id": 2, "method": "CancelTask", "params": {"id": task_id}}
    await caller.post("/a2a/lead", json=cancel)
    await _until(False, marker)
    return (time.perf_counter() - began) * 1000


async def _deadline_once(caller: httpx.AsyncClient) -> float:
    marker = _marker()
    deadline = int(time.time() * 1000) + DEADLINE_MS
    headers = {"X-Conclave-Deadline": str(deadline)}
    await caller.post("/a2a/lead", json=_send(marker), headers=headers)
    answered = time.time() * 1000
    await _until(False, marker)
    return max(answered, time.time() * 1000) - deadline


async def _measure(stack: EmbeddedStack, rounds: int, chains: int) -> CascadeSamples:
    token = stack.token("bench", f"top-{uuid.uuid4().hex[:6]}", ["agent:lead", "tool:run_shell"])
    headers = {"Authorization": f"Bearer {token}", "A2A-Version": "1.0"}
    async with (
        _workers(stack),
        httpx.AsyncClient(base_url=stack.url, headers=headers, timeout=60) as caller,
    ):
        # Deadlines first: the cancelled sleeps teach ATBA that the tool runs long, and then it
        # refuses a call that cannot finish in the time left (an early answer, not a violation).
        past = [await _deadline_once(caller) for _ in range(chains)]
        cancels = [await _cancel_once(caller) for _ in range(rounds)]
    violations = sum(1 for ms in past if ms > DEADLINE_SLACK_MS)
    return CascadeSamples(cancels, chains, violations, past)


def cascade_samples(stack: EmbeddedStack, rounds: int, chains: int) -> CascadeSamples:
    """`rounds` cancellations and `chains` deadline chains through `stack` (which serves
    `chain_config()`)."""
    return anyio.run(_measure, stack, rounds, chains)
