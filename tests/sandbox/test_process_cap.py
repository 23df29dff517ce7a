"""Each sandbox's process cap is its own: another sandbox's processes never make its forks fail.

Every sandbox of every backend runs as the same host uid (65534). A cap by RLIMIT_NPROC
counts all of that uid's processes on the host, so one tenant's fork bomb, or just many
busy sandboxes, made another tenant's `run_shell` fail with EAGAIN. The process backend now
caps each sandbox with its own cgroup, as bwrap does; a fork bomb is still stopped at its cap.
"""

from __future__ import annotations

import logging
from pathlib import Path

import anyio
import pytest

from protocol.serf import ErrorCode
from sandbox.backends import cgroup
from sandbox.backends.cgroup import SandboxCgroup
from sandbox.backends.process import ProcessBackend
from sandbox.pool import SandboxPool
from tests.helpers import until
from tests.sandbox.conftest import PoolFactory, invocation, processes_working_in
from tools.calls import Outcome

pytestmark = pytest.mark.anyio

HELD = 100  # under the default cap of 128: what a busy sandbox may hold
FORKS = 30  # together with HELD past 128, each far under it
# Children alive at once, each of which must fork: a refused fork fails the tool or its exit code.
FORKING = f"for i in $(seq {FORKS}); do sleep 0.2 & done; wait; echo forked {FORKS}"


async def _fork_in_other_tenant(pool: SandboxPool) -> Outcome:
    return await pool.execute(
        invocation("run_shell", {"command": FORKING}, tenant="globex", module="tools.builtin")
    )


def _assert_forked(outcome: Outcome) -> None:
    assert outcome.error is None, outcome.error
    assert outcome.result == {"stdout": f"forked {FORKS}\n", "stderr": "", "exit_code": 0}


async def _close_leaving_nothing(pool: SandboxPool, *outcomes: Outcome) -> None:
    """Close the pool; then none of its sandboxes' processes or cgroups is left (the
    sandboxes: those with a workspace now, each named by its id, and those `outcomes` ran in)."""
    root = pool.workspace_root
    ids = {workspace.name for workspace in root.iterdir() if workspace.is_dir()}
    ids |= {(o.usage.sandbox or "").split(":", 1)[1] for o in outcomes}
    await pool.aclose()
    assert processes_working_in(root) == []
    groups = [SandboxCgroup(i, t).dirs.values() for i in ids for t in ("acme", "globex")]
    assert [path for dirs in groups for path in dirs if path.exists()] == []


async def test_a_sandbox_forks_while_another_holds_many_processes(
    make_pool: PoolFactory,
) -> None:
    pool = await make_pool("process")
    root = pool.workspace_root
    # The marker is written by a shell builtin: no fork, so it comes even if forks failed.
    holding = f"for i in $(seq {HELD}); do sleep 30 & done; echo > held; wait"
    held: dict[str, Outcome] = {}

    async def hold() -> None:
        held["call"] = await pool.execute(
            invocation("run_shell", {"command": holding}, module="tools.builtin")
        )

    async with anyio.create_task_group() as group:
        group.start_soon(hold)
        await until(lambda: bool(held) or any(root.glob("*/held")), timeout_s=10)
        assert not held, f"a sandbox could not start {HELD} processes: {held['call'].error}"
        assert len(processes_working_in(root)) > HELD
        forked = await _fork_in_other_tenant(pool)
        group.cancel_scope.cancel()
    _assert_forked(forked)
    await _close_leaving_nothing(pool, forked)


async def test_a_fork_bomb_is_stopped_at_its_own_cap_and_others_still_fork(
    make_pool: PoolFactory,
) -> None:
    pool = await make_pool("process")
    outcomes: dict[str, Outcome] = {}

    async def bomb() -> None:
        outcomes["bomb"] = await pool.execute(invocation("fork_bomb"))

    async with anyio.create_task_group() as group:
        group.start_soon(bomb)
        forked = await _fork_in_other_tenant(pool)
    _assert_forked(forked)
    bombed = outcomes["bomb"]
    assert bombed.error is not None and bombed.error.code == ErrorCode.SANDBOX_KILLED
    assert "limit of 128 processes" in bombed.error.message
    await _close_leaving_nothing(pool, forked, bombed)


def test_without_cgroups_the_shared_cap_is_said_at_start_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """No silent fall-back: where no group per sandbox can be made (here: no controller
    mounted), the backend says its cap is the uid's, shared with every other sandbox."""
    monkeypatch.setattr(cgroup, "CGROUP_ROOT", tmp_path)
    with caplog.at_level(logging.WARNING, logger="conclave.sandbox"):
        backend = ProcessBackend()
    assert not backend.caps_processes
    said = [r.getMessage() for r in caplog.records if "RLIMIT_NPROC" in r.getMessage()]
    assert len(said) == 1 and f"not mounted at {tmp_path}" in said[0], said
    assert "RLIMIT_NPROC, which counts every process of" in said[0]
