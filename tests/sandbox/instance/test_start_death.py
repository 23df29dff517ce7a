"""A start that dies is told at once, from the death itself (issue 43): the runner's process
exit (bwrap, process) or the engine's `die` event (docker), never by asking the engine about
the container again and again while it starts.

A tool module that ends its runner as it is imported kills the sandbox after the runner's
hello: the call is refused with SANDBOX_UNAVAILABLE naming the death and the stage it came in
(the tool modules' import), long before the start's timeout. On docker, no start asks the
engine for its container's state. Before: a docker start asked the engine every 0.5 s (the
first ask 50 ms in), and a start's death did not say which stage it came in.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import docker
import pytest

from gateway.config import Settings
from protocol.serf import ErrorCode
from sandbox.backends.container_deaths import ContainerDeaths
from sandbox.backends.docker import DockerBackend
from sandbox.pool import SandboxPool
from sandbox.sandbox_config import DIRECT_POOL, SandboxConfig
from tests.sandbox.conftest import ALL_BACKENDS, TOOL_MODULES, invocation, make_backend

pytestmark = pytest.mark.anyio

ENDS_ITS_RUNNER = "import os\nos._exit(3)\n"


class _AskCounting(DockerBackend):
    """The docker backend, counting how often it asks the engine for a container's state."""

    asked = 0

    async def container_state(self, container_id: str) -> dict[str, Any]:
        self.asked += 1
        return await super().container_state(container_id)


async def _pool(backend: Any, tool_modules: tuple[str, ...], root: Path) -> SandboxPool:
    config = SandboxConfig.model_validate({**DIRECT_POOL.model_dump(), "spares": ()})
    return SandboxPool(backend, config, tool_modules=tool_modules, workspace_root=root)


@pytest.mark.parametrize("backend_name", ALL_BACKENDS)
async def test_a_runner_ended_by_its_tool_module_fails_the_start_at_once(
    backend_name: str, request: pytest.FixtureRequest
) -> None:
    code = Path(tempfile.mkdtemp(prefix="conclave-ends-"))
    package = code / "ends_its_runner"
    package.mkdir()
    (package / "__init__.py").write_text(ENDS_ITS_RUNNER)
    for path in (code, package, package / "__init__.py"):
        path.chmod(0o755)  # the sandbox's user reads it
    root = Path(tempfile.mkdtemp(prefix="conclave-pool-"))
    try:
        backend = make_backend(backend_name, request)
        async with await _pool(backend, (*TOOL_MODULES, str(package)), root) as pool:
            began = time.monotonic()
            outcome = await pool.execute(
                invocation("echo", {"message": "hi"}, module="tools.builtin")
            )
            took_s = time.monotonic() - began
    finally:
        shutil.rmtree(code, ignore_errors=True)
        shutil.rmtree(root, ignore_errors=True)
    assert outcome.error is not None and outcome.error.code == ErrorCode.SANDBOX_UNAVAILABLE
    # Said where it died: after its hello, in the tool modules' import.
    assert "died while starting importing its tool modules" in outcome.error.message
    assert "3" in outcome.error.message  # the exit status the runner was ended with
    assert took_s < 10  # its death, not the start's 30 s timeout


async def test_a_docker_start_never_asks_the_engine_about_its_container(
    docker_engine: str,
) -> None:
    backend = _AskCounting(docker_engine, Settings().sandbox.image)
    root = Path(tempfile.mkdtemp(prefix="conclave-pool-"))
    try:
        async with await _pool(backend, TOOL_MODULES, root) as pool:
            for i in range(3):
                call = invocation(
                    "echo", {"message": "hi"}, agent=f"new-{i}", module="tools.builtin"
                )
                outcome = await pool.execute(call)
                assert outcome.ok, outcome.error
    finally:
        shutil.rmtree(root, ignore_errors=True)
    assert pool.started == 3
    assert backend.asked == 0


async def test_a_docker_backend_serves_one_pool_after_another(docker_engine: str) -> None:
    """Its death events are read by a group of its own, entered at each `open` (the bench
    runs two pools on one backend, one after the other)."""
    backend = DockerBackend(docker_engine, Settings().sandbox.image)
    for round_ in range(2):
        root = Path(tempfile.mkdtemp(prefix="conclave-pool-"))
        try:
            async with await _pool(backend, TOOL_MODULES, root) as pool:
                call = invocation(
                    "echo", {"message": "hi"}, agent=f"a-{round_}", module="tools.builtin"
                )
                outcome = await pool.execute(call)
                assert outcome.ok, outcome.error
        finally:
            shutil.rmtree(root, ignore_errors=True)


async def test_a_container_created_and_not_started_is_not_taken_for_dead(
    docker_engine: str,
) -> None:
    """When the death reader (re)connects, it asks once about each container it watches (a
    death in the gap); a container created and not started yet is one a start is about to
    start, not a dead one (CI saw a start fail 'the container exited with 0' in that race)."""
    engine = docker.DockerClient(base_url=docker_engine)
    created = engine.containers.create(
        Settings().sandbox.image, ["true"], labels={"conclave.sandbox": "1"}
    )
    deaths = ContainerDeaths(docker_engine)
    taken_for_dead, reason = False, ""
    try:
        deaths.watch(created.id)
        async with anyio.create_task_group() as group:
            group.start_soon(deaths.read_forever)
            with anyio.move_on_after(1.0):  # the stream opened, the watched one asked about
                await deaths.died(created.id)
                taken_for_dead = True
            created.start()  # and once it runs and ends, its death comes as an event
            with anyio.fail_after(10):
                reason = await deaths.died(created.id)
            deaths.close()
            group.cancel_scope.cancel()
    finally:
        created.remove(force=True)
        engine.close()
    assert not taken_for_dead
    assert reason == "the container exited with 0"
