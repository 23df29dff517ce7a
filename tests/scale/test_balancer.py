"""A gateway replica SIGKILLed behind the balancer `conclave balancer` configures: agents on
kept-alive connections get an answer to every request, a success or a SERF error, never a
dropped connection, and a commit retried with its idempotency key lands once."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from conclave import EmbeddedStack
from conclave.stack.balancer import write_haproxy
from conclave.stack.ports import free_port
from tests.helpers import wait_for
from tests.scale.test_replicas import INSTANCE, _settings

pytestmark = pytest.mark.anyio
CLIENTS = 4
RUN_S = 3.0
KILL_AT_S = 1.0


@pytest.fixture
def balanced(redis_url: str, tmp_path: Path) -> Iterator[tuple[str, EmbeddedStack]]:
    """The balancer's URL over two gateways, and the first gateway (the one to kill)."""
    haproxy = shutil.which("haproxy")
    assert haproxy, "haproxy is missing: apt-get install haproxy (.ci installs it)"
    settings = _settings(redis_url, tmp_path).model_copy(
        update={"rate_limit_per_s": 1000.0, "rate_limit_burst": 1000}
    )
    with EmbeddedStack(settings) as first, EmbeddedStack(settings) as second:
        port = free_port()
        config = write_haproxy(tmp_path / "balancer", port, [first.url, second.url], log=True)
        log = (tmp_path / "haproxy.log").open("wb")
        process = subprocess.Popen([haproxy, "-f", str(config)], stdout=log)
        try:
            url = f"http://127.0.0.1:{port}"

            def both_up() -> bool:
                try:
                    seen = {httpx.get(f"{url}/healthz").headers[INSTANCE] for _ in range(4)}
                except (httpx.TransportError, KeyError):
                    return False
                return len(seen) == 2

            wait_for(both_up, 10, "haproxy forwarding to both gateways")
            yield url, first
        finally:
            process.terminate()
            process.wait(timeout=10)
            log.close()


async def test_a_replica_killed_under_kept_alive_agents_drops_no_request_unanswered(
    balanced: tuple[str, EmbeddedStack], tmp_path: Path
) -> None:
    url, victim = balanced
    headers = {"Authorization": f"Bearer {victim.token('acme', 'clerk', ['state:*:write'])}"}
    outcomes: Counter[str] = Counter()
    acked: dict[str, int] = {}
    served_by: set[str] = set()
    async with httpx.AsyncClient(base_url=url, timeout=10) as setup:
        created = await setup.put("/v1/state/books", json={}, headers=headers)
        assert created.is_success, created.text
    stop_at = time.monotonic() + RUN_S

    async def clerk(n: int) -> None:
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:  # kept alive
            seq = 0
            while time.monotonic() < stop_at:
                seq += 1
                key = f"c{n}-{seq}"
                body = {"writes": [{"key": key, "value": seq}], "idempotency_key": key}
                while True:  # the same commit until it is acknowledged
                    try:
                        answer = await client.post(
                            "/v1/state/books/commit", json=body, headers=headers
                        )
                    except httpx.TransportError as error:
                        outcomes[f"dropped: {type(error).__name__}"] += 1
                        break
                    if answer.is_success:
                        outcomes["ok"] += 1
                        served_by.add(answer.headers[INSTANCE])
                        acked[key] = answer.json()["versions"][key]
                        break
                    outcomes[answer.json()["code"]] += 1  # a SERF body, or this fails
                    await anyio.sleep(0.05)

    async def kill_victim() -> None:
        await anyio.sleep(KILL_AT_S)
        for instance in victim.instances:
            os.kill(int(instance.rsplit(":", 1)[1]), signal.SIGKILL)
        # the stack (this test's process) holds the listening socket: close it, as a killed
        # `conclave serve` does by dying, so nothing waits in its accept queue
        await anyio.to_thread.run_sync(victim.stop)

    async with anyio.create_task_group() as tasks:
        for n in range(CLIENTS):
            tasks.start_soon(clerk, n)
        tasks.start_soon(kill_victim)

    logged = (tmp_path / "haproxy.log").read_text().splitlines()
    unusual = [line for line in logged if " ---- " not in line]  # HAProxy's view of them
    assert not [o for o in outcomes if o.startswith("dropped")], (outcomes, unusual)
    assert len(served_by) == 2 and outcomes["ok"] > 20, (served_by, outcomes)
    async with httpx.AsyncClient(base_url=url, timeout=10) as reader:
        for key, version in acked.items():
            read = await reader.get(f"/v1/state/books/{key}", headers=headers)
            assert read.json()["version"] == version, (key, read.text)
