"""Docker's blocking work (create, start, inspect, remove) runs off the event loop in a pool
of the backend's own, as many threads as `CONCLAVE_SANDBOX_ENGINE_THREADS` says (issue 43):
a burst of new identities never has more engine calls in flight than that, and each of them
still gets its sandbox. Before: every call took a thread from anyio's default pool of 40,
which the gateway's other blocking work shares, and no setting bounded it.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import anyio
import pytest

from gateway.config import Settings
from sandbox.backends.docker import DockerBackend
from sandbox.pool import SandboxPool
from sandbox.sandbox_config import DIRECT_POOL, SandboxConfig
from tests.sandbox.conftest import TOOL_MODULES, invocation

pytestmark = pytest.mark.anyio

NEW_AGENTS = 6


def test_the_setting_reaches_the_docker_backend() -> None:
    settings = Settings(sandbox_engine_threads=3)
    assert settings.sandbox.engine_threads == 3


async def test_a_burst_of_docker_starts_keeps_to_the_engine_threads(docker_engine: str) -> None:
    backend = DockerBackend(docker_engine, Settings().sandbox.image, engine_threads=2)
    config = SandboxConfig.model_validate({**DIRECT_POOL.model_dump(), "spares": ()})
    root = Path(tempfile.mkdtemp(prefix="conclave-pool-"))
    in_flight: list[float] = []
    try:
        async with SandboxPool(
            backend, config, tool_modules=TOOL_MODULES, workspace_root=root
        ) as pool:
            done = anyio.Event()

            async def sample() -> None:
                while not done.is_set():
                    threads = backend._threads
                    in_flight.append(0 if threads is None else threads.borrowed_tokens)
                    await anyio.sleep(0.001)

            outcomes = []

            async def first_call(i: int) -> None:
                call = invocation(
                    "echo", {"message": str(i)}, agent=f"new-{i}", module="tools.builtin"
                )
                outcomes.append(await pool.execute(call))

            async with anyio.create_task_group() as group:
                group.start_soon(sample)
                async with anyio.create_task_group() as calls:
                    for i in range(NEW_AGENTS):
                        calls.start_soon(first_call, i)
                done.set()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    assert [o.ok for o in outcomes] == [True] * NEW_AGENTS, [o.error for o in outcomes]
    assert max(in_flight) == 2  # the pool was used to the full, and never past it
