"""Locks the gateway processes on one host share: an `flock` on a file in a directory of the
gateway user's own (0700). The kernel drops a process's locks when it dies, so a crashed
gateway holds none; the files stay (one per name ever locked: a few bytes each)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from sandbox.backend import SandboxStartError

LOCK_ROOT = Path(tempfile.gettempdir()) / f"conclave-locks-{os.geteuid()}"


def open_lock_file(lock_dir: Path, name: str) -> int:
    """A descriptor of the lock file `name` in `lock_dir` (made 0700 if missing)."""
    lock_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    owner = lock_dir.stat().st_uid
    if owner != os.geteuid():  # a shared /tmp lets anyone make it first, and hold our locks
        raise SandboxStartError(
            f"the lock directory {lock_dir} belongs to uid {owner}, not to the gateway's "
            "user: remove it"
        )
    return os.open(lock_dir / name, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
