"""A task survives the death of the replica that accepted it: two gateway processes behind
HAProxy, the official `mcp` 2.x client on the 2026-07-28 wire with the tasks extension, a
long-running idempotent tool's task, and the replica that answered its `tools/call`
SIGKILLed while the call runs. The client's next polls reach the survivor, which finds the
task's lease lapsed, runs the call again from its record, and answers its result."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from redis import Redis

from conclave import EmbeddedStack
from conclave.stack.balancer import write_haproxy
from conclave.stack.ports import free_port
from gateway.mcp_tasks import task_key
from tests.helpers import wait_for
from tests.mcp_tasks_client import CreateTaskResult, Tasks, poll_task
from tests.scale.test_replicas import INSTANCE, _settings

pytestmark = pytest.mark.anyio
LEASE_MS = 1000  # how soon the survivor may take the task over
SLEEP = {"distribution": "fixed", "median_ms": 2000}


@pytest.fixture
def pair(redis_url: str, tmp_path: Path) -> Iterator[tuple[str, list[EmbeddedStack]]]:
    """The balancer's URL over two gateways (one process each), and the two stacks."""
    haproxy = shutil.which("haproxy")
    assert haproxy, "haproxy is missing: apt-get install haproxy (.ci installs it)"
    settings = _settings(redis_url, tmp_path).model_copy(
        update={"rate_limit_per_s": 1000.0, "rate_limit_burst": 1000, "task_lease_ms": LEASE_MS}
    )
    with EmbeddedStack(settings) as first, EmbeddedStack(settings) as second:
        port = free_port()
        config = write_haproxy(tmp_path / "balancer", port, [first.url, second.url])
        process = subprocess.Popen([haproxy, "-f", str(config)])
        try:
            url = f"http://127.0.0.1:{port}"

            def both_up() -> bool:
                try:
                    seen = {httpx.get(f"{url}/healthz").headers[INSTANCE] for _ in range(4)}
                except (httpx.TransportError, KeyError):
                    return False
                return len(seen) == 2

            wait_for(both_up, 10, "haproxy forwarding to both gateways")
            yield url, [first, second]
        finally:
            process.terminate()
            process.wait(timeout=10)


async def test_a_task_survives_the_death_of_the_replica_that_accepted_it(
    pair: tuple[str, list[EmbeddedStack]], redis_url: str
) -> None:
    url, stacks = pair
    agent = f"f{uuid.uuid4().hex[:8]}"
    token = stacks[0].token("acme", agent, ["tool:heavy_tailed_sleep"])
    answered_by: list[tuple[str, str]] = []  # (method, the replica that answered it)

    async def note(response: httpx.Response) -> None:
        method = response.request.headers.get("mcp-method", "")
        answered_by.append((method, response.headers.get(INSTANCE, "")))

    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    http.headers["Connection"] = "close"  # every request balanced anew, as agents spread
    http.event_hooks["response"].append(note)
    transport = streamable_http_client(f"{url}/mcp", http_client=http)
    async with http, Client(transport, extensions=[Tasks()]) as mcp:
        # A 60 s timeout: the tool declares itself long-running, so the answer is a task.
        created = await mcp.session.call_tool("heavy_tailed_sleep", SLEEP, allow_claimed=True)
        assert isinstance(created, CreateTaskResult), created
        accepted = next(i for m, i in reversed(answered_by) if m == "tools/call")
        victim = next(s for s in stacks if accepted in s.instances)
        os.kill(int(accepted.rsplit(":", 1)[1]), signal.SIGKILL)  # its call dies with it
        # The stack (this test's process) holds the listening socket: close it, as a killed
        # `conclave serve` does by dying, so nothing waits in its accept queue.
        await anyio.to_thread.run_sync(victim.stop)
        ended = await poll_task(mcp.session, created.task_id, timeout_s=30)
    assert ended.status == "completed", ended
    assert ended.result is not None and ended.result["structuredContent"] == {"result": 2000.0}
    survivor = next(i for s in stacks if s is not victim for i in s.instances)
    polls = [instance for method, instance in answered_by if method == "tasks/get"]
    assert polls and polls[-1] == survivor  # the survivor answered for the task
    with Redis.from_url(redis_url, decode_responses=True) as redis:
        attempts = redis.hget(task_key("acme", created.task_id), "attempts")
    assert attempts is not None and int(attempts) >= 2  # run again, not lost
