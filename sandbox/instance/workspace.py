"""A sandbox's workspace on the host, and the record of which gateway process owns it.

Each workspace is `<root>/<sandbox id>/`. The root is the gateway user's, mode 0700: no other
host user, the sandboxes' own included, reaches a workspace through it; a sandbox sees only
its own workspace, which its backend mounts for it. A gateway running as root gives each
workspace to the sandbox's own uid (`SandboxSpec.uid`, mode 0700); one that cannot leaves it
open to the sandbox's user inside the closed root. Beside it (not in it, so no tool can forge it)
`<sandbox id>.owner` holds the pid of the process whose pool made it. A gateway that is
killed, not stopped, cannot remove its workspaces; `conclave sandbox gc` then finds them by
their owner's pid being gone, as it finds containers by their owner label.

Quota: with a `WorkspaceQuota`, each workspace is its own tmpfs of that many bytes and
inodes, mounted on the host before the sandbox starts, so every backend binds the same
bounded file system and the host sees what is in it. Tool code that fills it gets ENOSPC,
the call answers SANDBOX_DISK_FULL (`disk_full_error`), and no other workspace, nor the
disk the gateway and Redis write to, loses a byte. Its pages are the sandbox's memory (the
writer's cgroup pays for them). Mounting needs root (CAP_SYS_ADMIN): a gateway that is not
root makes plain directories and says so once, loudly.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import os
import shutil
import tempfile
from pathlib import Path

from protocol import ErrorCode, SerfError
from sandbox.backend import SANDBOX_UID, SandboxStartError, WorkspaceQuota

DEFAULT_ROOT = Path(tempfile.gettempdir()) / "conclave-sandboxes"
_OWNER_SUFFIX = ".owner"
_MS_NOSUID, _MS_NODEV = 2, 4
_MNT_DETACH = 2
_LIBC = ctypes.CDLL(None, use_errno=True)
log = logging.getLogger("conclave.sandbox")
_warned_unquoted = False


def workspace_is_full(workspace: Path) -> bool:
    """Whether a workspace has (next to) no room left, in bytes or in files, by the host's
    own look at it."""
    try:
        seen = os.statvfs(workspace)
    except OSError:
        return False
    slack_blocks = max(1, (64 * 1024) // max(1, seen.f_frsize))
    return seen.f_bavail <= slack_blocks or seen.f_favail <= 1


def disk_full_error(quota: WorkspaceQuota) -> SerfError:
    return SerfError.of(
        ErrorCode.SANDBOX_DISK_FULL,
        f"the sandbox's workspace is full (its quota is {quota.size_mb} MiB and "
        f"{quota.inodes} files); delete files you no longer need in a later call, or write "
        "less (CONCLAVE_SANDBOX_WORKSPACE_MB sets the quota)",
        details={"workspace_mb": quota.size_mb, "workspace_inodes": quota.inodes},
    )


def _owner_file(workspace: Path) -> Path:
    return workspace.with_name(workspace.name + _OWNER_SUFFIX)


def create_workspace(
    root: Path, sandbox_id: str, quota: WorkspaceQuota | None = None, uid: int = SANDBOX_UID
) -> Path:
    _close_root(root)
    workspace = root / sandbox_id
    workspace.mkdir(mode=0o700)
    _owner_file(workspace).write_text(str(os.getpid()))
    if os.geteuid() == 0:
        if quota is not None:
            _mount_quota(workspace, quota)
        os.chown(workspace, uid, uid)
    else:
        _warn_unquoted(quota)
        workspace.chmod(0o777)  # the sandbox's user writes here; the root keeps others out
    return workspace


def _mount_quota(workspace: Path, quota: WorkspaceQuota) -> None:
    options = f"size={quota.size_mb}m,nr_inodes={quota.inodes},mode=0700"
    flags = _MS_NOSUID | _MS_NODEV
    if _LIBC.mount(b"tmpfs", bytes(workspace), b"tmpfs", flags, options.encode()) != 0:
        problem = os.strerror(ctypes.get_errno())
        remove_workspace(workspace)
        raise SandboxStartError(
            f"cannot mount the workspace quota on {workspace} ({problem}): run the gateway "
            "with CAP_SYS_ADMIN, or set CONCLAVE_SANDBOX_WORKSPACE_MB=0 to run without one"
        )


def _warn_unquoted(quota: WorkspaceQuota | None) -> None:
    global _warned_unquoted
    if quota is None or _warned_unquoted:
        return
    _warned_unquoted = True
    log.warning(
        "sandbox workspaces have no quota: mounting one needs the gateway to run as root; "
        "tool code can fill the disk the workspace root %s is on",
        DEFAULT_ROOT,
    )


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
    # backend's runner runs as its sandbox's uid with no mount of its own to reach it by. Each
    # workspace is its sandbox's uid's, 0700, so no other host user enters one.
    root.chmod(0o711 if os.geteuid() == 0 else 0o700)


def remove_workspace(workspace: Path) -> None:
    unmounted = os.geteuid() != 0 or _LIBC.umount2(bytes(workspace), _MNT_DETACH) == 0
    if not unmounted and ctypes.get_errno() not in (errno.EINVAL, errno.ENOENT):
        log.warning("could not unmount the workspace %s", workspace)  # EINVAL: not mounted
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
