"""Hostile tool code against the isolating backends: each attack contained, with its code.

Every test also shows the damage stays inside: another agent's sandbox keeps answering, the
host is untouched, and nothing of the pool is left on the host after shutdown.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import anyio
import docker
import pytest

from protocol.serf import ErrorCode
from sandbox.backends.cgroup import CGROUP_ROOT, GROUP_PARENT
from sandbox.pool import SandboxPool
from tests.sandbox.conftest import (
    ISOLATING,
    PoolFactory,
    invocation,
    processes_mentioning,
    signal_the_runner,
)
from tools.calls import Outcome

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("backend", ISOLATING)]


async def _echo(pool: SandboxPool, agent: str = "bystander") -> Outcome:
    return await pool.execute(
        invocation("echo", {"message": "still here"}, agent=agent, module="tools.builtin")
    )


def _sandbox_ids(*outcomes: Outcome) -> set[str]:
    return {o.usage.sandbox.split(":", 1)[1] for o in outcomes if o.usage.sandbox}


async def _assert_nothing_left(backend: str, pool: SandboxPool, ids: set[str]) -> None:
    await pool.aclose()
    assert processes_mentioning(str(pool.workspace_root)) == []
    if backend == "bwrap":
        leftovers = {p.name for p in (CGROUP_ROOT / "pids" / GROUP_PARENT).glob("tenant-*/sbx-*")}
        assert not leftovers & ids
    if backend == "docker":
        client = docker.DockerClient(base_url=pool.backend.docker_host)  # type: ignore[attr-defined]
        try:
            mine = client.containers.list(
                ignore_removed=True,
                all=True,
                filters={"label": f"conclave.owner_pid={os.getpid()}"},
            )
            assert not {c.labels["conclave.sandbox_id"] for c in mine} & ids
        finally:
            client.close()


async def test_fork_bomb_is_contained_and_others_keep_working(
    backend: str, make_pool: PoolFactory
) -> None:
    pool = await make_pool(backend)
    before = await _echo(pool)
    outcomes: dict[str, Outcome] = {}

    async def bomb() -> None:
        outcomes["bomb"] = await pool.execute(invocation("fork_bomb", timeout_ms=3000))

    async with anyio.create_task_group() as group:
        group.start_soon(bomb)
        during = await _echo(pool)
    assert during.ok and during.usage.sandbox == before.usage.sandbox
    bombed = outcomes["bomb"]
    assert bombed.error is not None
    # Stopped at the sandbox's process limit (or its deadline), said as such.
    assert bombed.error.code in (ErrorCode.SANDBOX_KILLED, ErrorCode.TOOL_TIMEOUT)
    if bombed.error.code == ErrorCode.SANDBOX_KILLED:
        assert "limit of 128 processes" in bombed.error.message
    # The bombed sandbox serves nothing more: its processes may still be dying.
    again = await pool.execute(invocation("whoami"))
    assert again.ok and again.usage.sandbox != bombed.usage.sandbox
    await _assert_nothing_left(backend, pool, _sandbox_ids(before, bombed, again))


async def test_memory_past_the_sandbox_ceiling_is_oom(backend: str, make_pool: PoolFactory) -> None:
    pool = await make_pool(backend)
    # Each child stays under the call's 256 MB; together they pass the 448 MB ceiling.
    hog = invocation("allocate_in_children", {"processes": 4, "megabytes": 200}, memory_mb=256)
    outcome = await pool.execute(hog)
    assert outcome.error is not None and outcome.error.code == ErrorCode.SANDBOX_OOM
    assert outcome.error.details["ceiling_mb"] == 448 and "memory_mb" in outcome.error.message
    after = await _echo(pool, agent="alice")
    assert after.ok and after.usage.sandbox != outcome.usage.sandbox  # recycled
    await _assert_nothing_left(backend, pool, _sandbox_ids(outcome, after))


async def test_writes_outside_the_workspace_fail_and_the_host_is_untouched(
    backend: str, make_pool: PoolFactory, tmp_path: Path
) -> None:
    pool = await make_pool(backend)
    escape = tmp_path / "escaped.txt"
    for target in ("/etc/conclave-pwned", "/opt/conclave/code/tools/pwned.py", str(escape)):
        outcome = await pool.execute(invocation("write_path", {"path": target}))
        assert outcome.error is not None, target
        # Refused (read-only, not ours) or not there at all (a path outside the sandbox).
        refusals = (ErrorCode.TOOL_FAILED, ErrorCode.PERMISSION_DENIED, ErrorCode.NOT_FOUND)
        assert outcome.error.code in refusals
    assert not escape.exists() and not await anyio.Path("/etc/conclave-pwned").exists()
    inside = await pool.execute(invocation("write_path", {"path": "/workspace/ok.txt"}))
    assert inside.ok
    workspaces = list(pool.workspace_root.glob("sbx-*/ok.txt"))
    assert [w.read_text() for w in workspaces] == ["pwned"]
    tmp = await pool.execute(invocation("write_path", {"path": "/tmp/scratch"}))
    assert tmp.ok  # a private tmpfs
    await _assert_nothing_left(backend, pool, _sandbox_ids(inside))


async def test_the_hosts_files_are_not_visible(
    backend: str, make_pool: PoolFactory, tmp_path: Path
) -> None:
    pool = await make_pool(backend)
    secret = tmp_path / "gateway-secret"
    secret.write_text("s3cr3t-signing-key")
    for path in (str(secret), "/root/.bash_history", "/etc/shadow"):
        outcome = await pool.execute(invocation("read_path", {"path": path}))
        assert outcome.error is not None, path
        assert "s3cr3t" not in outcome.error.model_dump_json()
    await _assert_nothing_left(backend, pool, set())


async def test_no_network(backend: str, make_pool: PoolFactory) -> None:
    pool = await make_pool(backend)
    accepted: list[object] = []
    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener:
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        async with anyio.create_task_group() as group:

            async def serve() -> None:
                await listener.serve(lambda stream: accepted.append(stream) or stream.aclose())

            group.start_soon(serve)
            local = await pool.execute(invocation("connect", {"host": "127.0.0.1", "port": port}))
            remote = await pool.execute(invocation("connect", {"host": "1.1.1.1", "port": 80}))
            group.cancel_scope.cancel()
    for outcome in (local, remote):
        assert outcome.error is not None
        assert outcome.error.code in (ErrorCode.UPSTREAM_UNAVAILABLE, ErrorCode.TOOL_FAILED)
    assert accepted == []
    await _assert_nothing_left(backend, pool, _sandbox_ids(local))


async def test_a_stopped_runner_does_not_disturb_other_agents(
    backend: str, make_pool: PoolFactory
) -> None:
    pool = await make_pool(backend)
    other = await _echo(pool, agent="neighbour")
    stopped = await signal_the_runner(pool, signal.SIGSTOP, timeout_ms=300)
    assert stopped.error is not None and stopped.error.code == ErrorCode.TOOL_TIMEOUT
    neighbour = await _echo(pool, agent="neighbour")
    assert neighbour.ok and neighbour.usage.sandbox == other.usage.sandbox
    await _assert_nothing_left(backend, pool, _sandbox_ids(other, stopped))
