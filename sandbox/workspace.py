"""A sandbox's workspace on the host, and the record of which gateway process owns it.

Each workspace is `<root>/<sandbox id>/`. The root is the gateway user's, mode 0700: no other
host user, the sandboxes' own included, reaches a workspace through it; a sandbox sees only
its own workspace, which its backend mounts for it. A gateway running as root gives each
workspace to the sandbox user (`SANDBOX_UID`, mode 0700); one that cannot leaves it open to
the sandbox user inside the closed root. Beside it (not in it, so no tool can forge it)
`<sandbox id>.owner` holds the pid of the process whose pool made it. A gateway that is
killed, not stopped, cannot remove its workspaces; `conclave sandbox gc` then finds them by
their owner's pid being gone, as it finds containers by their owner label.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

from sandbox.backend import SANDBOX_UID, SandboxStartError

DEFAULT_ROOT = Path(tempfile.gettempdir()) / "conclave-sandboxes"
_OWNER_SUFFIX = ".owner"


def _owner_file(workspace: Path) -> Path:
    return workspace.with_name(workspace.name + _OWNER_SUFFIX)


def create_workspace(root: Path, sandbox_id: str) -> Path:
    _close_root(root)
    workspace = root / sandbox_id
    workspace.mkdir(mode=0o700)
    if os.geteuid() == 0:
        os.chown(workspace, SANDBOX_UID, SANDBOX_UID)
    else:
        workspace.chmod(0o777)  # the sandbox's user (65534) writes here; the root keeps others out
    _owner_file(workspace).write_text(str(os.getpid()))
    return workspace


def _close_root(root: Path) -> None:
    """Make `root` the gateway user's, mode 0700; refuse one another user made (a shared /tmp
    lets anyone create the default root first)."""
    root.mkdir(parents=True, mode=0o700, exist_ok=True)
    owner = root.stat().st_uid
    if owner != os.geteuid():
        raise SandboxStartError(
            f"the sandbox workspace root {root} belongs to uid {owner}, not to the gateway's "
            f"user: remove it, or run the gateway as its owner"
        )
    # As root, others may pass through (not list) to a workspace they can name: the process
    # backend's runner runs as SANDBOX_UID with no mount of its own to reach it by. The
    # workspaces themselves are SANDBOX_UID's, 0700, so no other host user enters one.
    root.chmod(0o711 if os.geteuid() == 0 else 0o700)


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
