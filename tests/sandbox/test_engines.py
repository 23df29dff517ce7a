"""Sandboxes over two real Docker engines: placement, a stopped engine drained, its return.

Engine A is the session's (DOCKER_HOST); engine B is a second dockerd this module starts
itself (own data root, exec root, socket and pidfile, no bridge, no iptables, like
`.ci/lib.sh` start_engine), with the runtime image copied in by `RuntimeImageBuilder.copy_to`
(what `conclave sandbox build-image` does for CONCLAVE_DOCKER_HOSTS), and stops at the end.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import docker
import pytest
from docker.errors import DockerException

from conclave.bench.chaos.chaos_faults import SpareEngine
from gateway.config import Settings
from protocol import ErrorCode
from sandbox import SandboxStartError, create_executor
from sandbox.backends.docker import OWNER_LABEL
from sandbox.backends.docker_fleet import DockerFleet
from sandbox.images.runtime_image import RuntimeImageBuilder
from sandbox.pool import SandboxPool
from sandbox.sandbox_config import DIRECT_POOL
from tests.sandbox.conftest import TOOL_MODULES, invocation
from tools.calls import Invocation, Outcome

pytestmark = pytest.mark.anyio


@dataclasses.dataclass
class EngineB:
    host: str
    pid: int

    def stop(self) -> None:
        os.kill(self.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.pid, signal.SIGCONT)


def _answers(host: str) -> bool:
    if not Path(host.removeprefix("unix://")).exists():  # the SDK leaks a socket then
        return False
    try:
        client = docker.DockerClient(base_url=host, timeout=2)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except DockerException:
        return False


@pytest.fixture(scope="module")
def engine_b(docker_engine: str) -> Iterator[EngineB]:
    if shutil.which("dockerd") is None:
        pytest.fail("dockerd is required for the two-engine tests (apt-get install docker.io)")
    scratch = Path(tempfile.mkdtemp(prefix="ceb-", dir="/tmp"))  # short: socket path limits
    host = f"unix://{scratch}/docker.sock"
    argv = ["dockerd", "--data-root", str(scratch / "data"), "--exec-root", str(scratch / "x")]
    argv += ["-H", host, "--pidfile", str(scratch / "docker.pid")]
    argv += ["--bridge=none", "--iptables=false"]
    with (scratch / "dockerd.log").open("wb") as log:
        daemon = subprocess.Popen(argv, stdout=log, stderr=log, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not _answers(host):
            if daemon.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"dockerd B did not start: {(scratch / 'dockerd.log').read_text()}")
            time.sleep(0.2)
        builder = RuntimeImageBuilder(docker_engine, Settings().sandbox.image, say=lambda _: None)
        builder.copy_to(host)
        yield EngineB(host, daemon.pid)
    finally:
        os.kill(daemon.pid, signal.SIGCONT)
        daemon.terminate()
        try:
            daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
        subprocess.run(["umount", "-R", str(scratch / "x")], capture_output=True, check=False)
        shutil.rmtree(scratch, ignore_errors=True)


def our_containers(host: str, **labels: str) -> list[dict[str, str]]:
    """The labels of this process's sandbox containers on an engine (running or not)."""
    wanted = [f"{OWNER_LABEL}={os.getpid()}", *(f"{k}={v}" for k, v in labels.items())]
    client = docker.DockerClient(base_url=host, timeout=10)
    try:
        # one listing call (the models' list inspects each container after: one removed
        # meanwhile, as the pool does in the background, would fail it)
        found = client.api.containers(all=True, filters={"label": wanted})
        return [container["Labels"] for container in found]
    finally:
        client.close()


async def wait_for(condition: Any, seconds: float = 20) -> None:
    with anyio.fail_after(seconds):
        while not await anyio.to_thread.run_sync(condition):  # noqa: ASYNC110 (engines)
            await anyio.sleep(0.05)


def call(agent: str, tool: str = "echo", deadline_s: float = 20, **arguments: Any) -> Invocation:
    module = "tools.builtin" if tool == "echo" else "tools.harness.misbehaving"
    called = invocation(tool, arguments or {"message": "hi"}, agent=agent, module=module)
    deadline_ms = int((time.time() + deadline_s) * 1000)
    context = called.context.model_copy(update={"deadline_ms": deadline_ms})
    return dataclasses.replace(called, context=context)


@pytest.fixture
async def fleet_pool(docker_engine: str, engine_b: EngineB) -> AsyncIterator[SandboxPool]:
    fleet = DockerFleet([docker_engine, engine_b.host], Settings().sandbox.image, capacity=8)
    root = Path(tempfile.mkdtemp(prefix="conclave-fleet-"))
    config = DIRECT_POOL.model_copy(update={"pool_max": 16})
    pool = SandboxPool(fleet, config, tool_modules=TOOL_MODULES, workspace_root=root)
    await pool.open()
    try:
        yield pool
    finally:
        engine_b.resume()
        await pool.aclose()
        shutil.rmtree(root, ignore_errors=True)


async def run_all(pool: SandboxPool, calls: list[Invocation]) -> list[Outcome]:
    outcomes: list[Outcome] = [None] * len(calls)  # type: ignore[list-item]

    async def one(index: int) -> None:
        outcomes[index] = await pool.execute(calls[index])

    async with anyio.create_task_group() as group:
        for index in range(len(calls)):
            group.start_soon(one, index)
    return outcomes


async def test_sandboxes_spread_fail_over_while_an_engine_is_stopped_and_return_to_it(
    fleet_pool: SandboxPool, docker_engine: str, engine_b: EngineB
) -> None:
    a, b = docker_engine, engine_b.host
    # Placement by free capacity: four identities' sandboxes land two on each engine.
    outcomes = await run_all(fleet_pool, [call(f"first-{n}") for n in range(4)])
    assert all(outcome.ok for outcome in outcomes), outcomes
    on_b = [labels["conclave.agent"] for labels in our_containers(b)]
    assert len(on_b) == 2 and len(our_containers(a)) == 2

    # Engine B stops answering (its dockerd frozen). A call in flight on a sandbox there
    # answers SANDBOX_UNAVAILABLE, retryable, well within its deadline instead of hanging.
    engine_b.stop()
    began = time.monotonic()
    stuck = await fleet_pool.execute(call(on_b[0], "sleep", deadline_s=15, seconds=12))
    took = time.monotonic() - began
    assert stuck.error is not None and stuck.error.code == ErrorCode.SANDBOX_UNAVAILABLE
    assert stuck.error.retryable and took < 6, (stuck.error, took)
    # The retry runs on engine A.
    retried = await fleet_pool.execute(call(on_b[0]))
    assert retried.ok, retried.error
    assert our_containers(a, **{"conclave.agent": on_b[0]})

    # While B is down, new identities are placed on A only (and B's other sandbox refuses).
    outcomes = await run_all(fleet_pool, [call(f"during-{n}") for n in range(3)])
    assert all(outcome.ok for outcome in outcomes), outcomes
    for n in range(3):
        assert our_containers(a, **{"conclave.agent": f"during-{n}"})
    refused = await fleet_pool.execute(call(on_b[1]))
    assert refused.error is not None and refused.error.code == ErrorCode.SANDBOX_UNAVAILABLE

    # B answers again: the containers it was owed are removed, and new sandboxes go to it.
    engine_b.resume()
    await wait_for(lambda: not any(lab["conclave.agent"] in on_b for lab in our_containers(b)))
    outcomes = await run_all(fleet_pool, [call(f"after-{n}") for n in range(3)])
    assert all(outcome.ok for outcome in outcomes), outcomes
    assert {lab["conclave.agent"] for lab in our_containers(b)} & {f"after-{n}" for n in range(3)}

    # Nothing is left on either engine once the pool is closed.
    await fleet_pool.aclose()
    assert our_containers(a) == [] and our_containers(b) == []


async def test_starts_caught_by_the_stop_answer_within_their_deadline_and_leave_nothing(
    fleet_pool: SandboxPool, docker_engine: str, engine_b: EngineB
) -> None:
    assert (await fleet_pool.execute(call("warm-up"))).ok  # the health checks are running
    engine_b.stop()  # new starts placed on B before it is found out hang in its dockerd
    began = time.monotonic()
    outcomes = await run_all(fleet_pool, [call(f"caught-{n}", deadline_s=10) for n in range(4)])
    assert time.monotonic() - began < 10
    caught = [n for n, outcome in enumerate(outcomes) if not outcome.ok]
    assert caught, "placement alternates: some of these starts were placed on B"
    for n, outcome in enumerate(outcomes):
        if outcome.ok:
            assert our_containers(docker_engine, **{"conclave.agent": f"caught-{n}"})
        else:
            assert outcome.error is not None
            assert outcome.error.code == ErrorCode.SANDBOX_UNAVAILABLE, outcome.error
            assert outcome.error.retryable
    # Their retries start on A.
    retries = await run_all(fleet_pool, [call(f"caught-{n}") for n in caught])
    assert all(outcome.ok for outcome in retries), retries
    for n in caught:
        assert our_containers(docker_engine, **{"conclave.agent": f"caught-{n}"})
    engine_b.resume()
    await fleet_pool.aclose()
    # A create B finished after it came back is removed too.
    await wait_for(lambda: our_containers(engine_b.host) == [] == our_containers(docker_engine))


async def test_conclave_docker_hosts_builds_a_pool_over_every_engine(
    docker_engine: str, engine_b: EngineB, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONCLAVE_DOCKER_HOSTS", f'["{docker_engine}", "{engine_b.host}"]')
    settings = Settings(sandbox_backend="docker", data_dir=tmp_path)
    pool = create_executor(
        settings.sandbox.model_copy(update={"spares": ()}), settings.engine_hosts, TOOL_MODULES
    )
    await pool.open()
    try:
        outcomes = await run_all(pool, [call(f"configured-{n}") for n in range(2)])
        assert all(outcome.ok for outcome in outcomes), outcomes
        assert len(our_containers(docker_engine)) == len(our_containers(engine_b.host)) == 1
    finally:
        await pool.aclose()
    missing = settings.model_copy(update={"docker_hosts": (docker_engine, "unix:///nowhere.sock")})
    with pytest.raises(SandboxStartError, match=r"unix:///nowhere\.sock"):
        create_executor(missing.sandbox, missing.engine_hosts, TOOL_MODULES)


def test_the_readme_example_copies_the_image_to_every_engine_and_sweeps_them(
    docker_engine: str, engine_b: EngineB, tmp_path: Path
) -> None:
    """docs/scale.md's `<!-- example: two-engines.sh -->`, run as written with ENGINE_B set."""
    readme = (Path(__file__).parents[2] / "docs/scale.md").read_text()
    (script,) = re.findall(r"<!-- example: two-engines.sh -->\n```bash\n(.*?)```", readme, re.S)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONCLAVE_")}
    env.update(DOCKER_HOST=docker_engine, ENGINE_B=engine_b.host, CONCLAVE_DATA_DIR=str(tmp_path))
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"is up to date on {engine_b.host}" in done.stderr, done.stderr


# The Docker SDK does not close its socket when the engine's socket file is missing (the
# moment between stop and start): the garbage collector reports that, and it is the SDK's.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
async def test_an_engine_restarted_under_calls_answers_each_in_serf_and_leaves_nothing(
    docker_engine: str,
) -> None:
    await _restart_under_calls(docker_engine)
    gc.collect()  # the run's frames are gone: the SDK's unclosed sockets are reported here


async def _restart_under_calls(docker_engine: str) -> None:
    """dockerd stopped (its containers with it) and started again while calls run: each call
    gets a result, a retryable SANDBOX_* error or its TOOL_TIMEOUT (the engine's socket
    missing for a moment is no INTERNAL error), calls succeed again after it, and a container
    whose removal failed while the engine was down is removed once it answers."""
    image = Settings().sandbox.image
    spare = await anyio.to_thread.run_sync(SpareEngine(docker_engine, image).start)
    root = Path(tempfile.mkdtemp(prefix="conclave-fleet-"))
    pool = SandboxPool(
        DockerFleet([spare.host], image, capacity=8),
        DIRECT_POOL.model_copy(update={"pool_max": 16}),
        tool_modules=TOOL_MODULES,
        workspace_root=root,
    )
    await pool.open()
    answers: Counter[str] = Counter()
    restarted = anyio.Event()
    try:
        assert (await pool.execute(call("warm-up"))).ok

        async def caller(n: int) -> None:
            while True:
                outcome = await pool.execute(call(f"caller-{n}", deadline_s=5))
                answers["ok" if outcome.ok else str(outcome.error and outcome.error.code)] += 1
                if outcome.ok and restarted.is_set():
                    return
                await anyio.sleep(0.05)

        async with anyio.create_task_group() as callers:
            for n in range(3):
                callers.start_soon(caller, n)
            await anyio.sleep(1)
            await anyio.to_thread.run_sync(spare.restart)
            restarted.set()
        failed = set(answers) - {"ok"}
        sandbox_codes = {ErrorCode.SANDBOX_UNAVAILABLE, ErrorCode.SANDBOX_KILLED}
        assert failed <= sandbox_codes | {ErrorCode.TOOL_TIMEOUT}, answers  # by the deadline
        await pool.aclose()
        assert our_containers(spare.host) == []
    finally:
        await pool.aclose()
        spare.stop()
        shutil.rmtree(root, ignore_errors=True)
