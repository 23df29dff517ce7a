"""Workspaces record their owner, go with their sandbox, and gc finds the abandoned ones."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.backend import SANDBOX_UID, SandboxStartError
from sandbox.instance.workspace import abandoned_workspaces, create_workspace, remove_workspace
from tests.sandbox.conftest import PoolFactory, invocation

pytestmark = pytest.mark.anyio


async def test_a_sandbox_workspace_names_its_owner_and_leaves_with_it(
    make_pool: PoolFactory,
) -> None:
    pool = await make_pool("process")
    assert (await pool.execute(invocation("whoami"))).ok
    [workspace] = [p for p in pool.workspace_root.iterdir() if p.is_dir()]
    owner = workspace.with_name(workspace.name + ".owner")
    assert owner.read_text() == str(os.getpid())
    assert abandoned_workspaces(pool.workspace_root, include_live_owners=False) == []
    await pool.aclose()
    assert list(pool.workspace_root.iterdir()) == []  # the directory and its owner record


def _dead_pid() -> int:
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True)  # fmt: skip
    return int(finished.stdout)


def test_gc_finds_the_workspaces_of_a_gateway_that_is_gone(tmp_path: Path) -> None:
    live = create_workspace(tmp_path, "sbx-live")
    orphan = create_workspace(tmp_path, "sbx-orphan")
    (orphan / "notes.txt").write_text("left behind")
    orphan.with_name("sbx-orphan.owner").write_text(str(_dead_pid()))
    unrecorded = tmp_path / "sbx-older"  # made before owners were recorded
    unrecorded.mkdir()

    assert abandoned_workspaces(tmp_path, include_live_owners=False) == [orphan]
    assert abandoned_workspaces(tmp_path, include_live_owners=True) == [
        live, unrecorded, orphan,
    ]  # fmt: skip
    remove_workspace(orphan)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sbx-live", "sbx-live.owner", "sbx-older"]


def test_workspaces_are_closed_to_everyone_but_the_sandbox_user(tmp_path: Path) -> None:
    root = tmp_path / "sandboxes"  # made by create_workspace, whatever the umask allows
    workspace = create_workspace(root, "sbx-a", uid=SANDBOX_UID)
    assert stat.S_IMODE(root.stat().st_mode) & 0o066 == 0  # no one else lists or changes it
    mode = workspace.stat()
    owner = SANDBOX_UID if os.geteuid() == 0 else os.geteuid()
    assert (mode.st_uid, stat.S_IMODE(mode.st_mode) & 0o077 == 0) == (owner, os.geteuid() == 0)


def test_a_workspace_root_another_user_made_is_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root can make a directory another user's")
    squatted = tmp_path / "squatted"  # as anyone may make the default root in /tmp first
    squatted.mkdir(mode=0o777)
    os.chown(squatted, SANDBOX_UID, SANDBOX_UID)
    with pytest.raises(SandboxStartError, match="belongs to uid 65534"):
        create_workspace(squatted, "sbx-a")
    assert list(squatted.iterdir()) == []
