"""How long a cancelled call's processes outlive the cancel, through the gateway.

An agent's `run_shell` call sleeps (`sleep <unique marker>`) over `/mcp`; once its processes
run (found on this machine by the marker in their command line: every backend's processes
are visible from the host), the agent either sends `notifications/cancelled` or closes the
call's connection, and the clock runs until the last of those processes is gone (reaped, or
a zombie). The cancel's own HTTP round trip is inside the measure. Warm-up calls go first, so
every cancelled call runs in a warm sandbox, as the ones the goal is about.
"""

from __future__ import annotations

import random
import time
import uuid
from typing import Any

import anyio
import httpx

from conclave.bench.core import alive, processes_with
from conclave.stack import EmbeddedStack

POLL_S = 0.0005  # how often the processes are looked at once the cancel is sent
START_WITHIN_S = 30.0
GONE_WITHIN_S = 10.0


def _marker() -> str:
    return f"25.{random.randrange(10**9):09d}"  # a sleep of 25 s no other process has


async def _processes_of(marker: str) -> list[int]:
    with anyio.fail_after(START_WITHIN_S):
        while not (pids := processes_with(marker)):  # noqa: ASYNC110 (other processes: no event)
            await anyio.sleep(0.005)
    return pids


async def _gone_after(pids: list[int], began: float) -> float:
    """Ms from `began` (perf_counter) until none of `pids` is alive."""
    with anyio.fail_after(GONE_WITHIN_S):
        while any(alive(pid) for pid in pids):  # noqa: ASYNC110 (other processes: no event)
            await anyio.sleep(POLL_S)
    return (time.perf_counter() - began) * 1000


def _call(request_id: str, marker: str) -> dict[str, Any]:
    params = {"name": "run_shell", "arguments": {"command": f"sleep {marker}"}}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


async def _one(http: httpx.AsyncClient, headers: dict[str, str], how: str, i: int) -> float:
    marker = _marker()
    request_id = f"bench-{i}"
    async with httpx.AsyncClient(base_url=str(http.base_url), headers=headers, timeout=60) as own:
        request = own.build_request("POST", "/mcp", json=_call(request_id, marker))
        sending = anyio.CancelScope()

        async def send() -> None:
            with sending:
                await own.send(request)

        async with anyio.create_task_group() as group:
            group.start_soon(send)
            pids = await _processes_of(marker)
            began = time.perf_counter()
            if how == "notifications/cancelled":
                params = {"requestId": request_id}
                notice = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}
                await http.post("/mcp", json=notice)
            else:  # the client closes the call's connection (httpx does, on a cancelled send)
                sending.cancel()
            took = await _gone_after(pids, began)
            sending.cancel()
    return took


async def _measure(stack: EmbeddedStack, rounds: int) -> dict[str, list[float]]:
    agent = f"cancel-{uuid.uuid4().hex[:8]}"
    token = stack.token("bench", agent, ["tool:run_shell"])
    headers = {"Authorization": f"Bearer {token}"}
    samples: dict[str, list[float]] = {}
    async with httpx.AsyncClient(base_url=stack.url, headers=headers, timeout=60) as http:
        for _ in range(3):  # the agent's sandbox started and warm
            body = {"arguments": {"command": "true"}}
            warm = await http.post("/v1/tools/run_shell/call", json=body)
            assert warm.status_code == 200, warm.text
        for how in ("notifications/cancelled", "client disconnect"):
            samples[how] = [await _one(http, headers, how, i) for i in range(rounds)]
    return samples


def cancel_to_gone_ms(stack: EmbeddedStack, rounds: int) -> dict[str, list[float]]:
    """Per way of cancelling, `rounds` samples of ms from the cancel to the processes gone."""
    return anyio.run(_measure, stack, rounds)


__all__ = ["cancel_to_gone_ms"]
