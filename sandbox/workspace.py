"""A sandbox's workspace on the host, and the record of which gateway process owns it.

Each workspace is `<root>/<sandbox id>/`, writable by the sandbox's user. Beside it (not in
it, so no tool can forge it) `<sandbox id>.owner` holds the pid of the process whose pool
made it. A gateway that is killed, not stopped, cannot remove its workspaces; `conclave
sandbox gc` then finds them by their owner's pid being gone, as it finds containers by their
owner label.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

DEFAULT_ROOT = Path(tempfile.gettempdir()) / "conclave-sandboxes"
_OWNER_SUFFIX = ".owner"


def _owner_file(workspace: Path) -> Path:
    return workspace.with_name(workspace.name + _OWNER_SUFFIX)


def create_workspace(root: Path, sandbox_id: str) -> Path:
    workspace = root / sandbox_id
    workspace.mkdir(parents=True, mode=0o777)
    workspace.chmod(0o777)  # the sandbox's user (65534) writes here
    _owner_file(workspace).write_text(str(os.getpid()))
    return workspace


def remove_workspace(workspace: Path) -> None:
    shutil.rmtree(workspace, ignore_errors=True)
    with contextlib.suppress(FileNotFoundError):
        _owner_file(workspace).unlink()


def _owner_alive(workspace: Path) -> bool:
    try:
        owner = _owner_file(workspace).read_text().strip()
    except FileNotFoundError:
        return True  # made before owners were recorded: only `--all` removes it
    return owner.isdigit() and Path(f"/proc/{owner}").exists()


def abandoned_workspaces(root: Path = DEFAULT_ROOT, *, include_live_owners: bool) -> list[Path]:
    """Workspaces whose owning process is gone (every workspace, if asked)."""
    if not root.is_dir():
        return []
    return [
        workspace
        for workspace in sorted(root.iterdir())
        if workspace.is_dir() and (include_live_owners or not _owner_alive(workspace))
    ]
