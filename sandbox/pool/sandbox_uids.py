"""The host uids sandboxes run under: one of its own for every live sandbox (issue 43).

Conclave owns the range `FIRST_SANDBOX_UID` .. `+ SANDBOX_UID_COUNT - 1` (0x60000000 up,
far above any login or system user and any subordinate-uid range `useradd` hands out). A
sandbox's runner and tools run as its uid, so the kernel itself keeps them from signalling,
tracing or reading `/proc/<pid>` of another sandbox's processes (a different uid, and the
runner is not dumpable), and its workspace (0700, its uid's) from every other sandbox.

A uid is claimed for a sandbox before its workspace is made and released only after its
teardown returned, which waits until every process of the sandbox is gone (the cgroup's
freeze-and-kill, the process group sweep, or the container's removal): a uid is never reused
while a process of the old sandbox lives. The lowest free uid is taken, so the lock files
number the peak of live sandboxes, not every sandbox ever started.

Several gateway processes on one host (`--workers N`) share the range: each claim holds an
exclusive `flock` on `<lock dir>/<uid>` (`sandbox.host_locks`), which the kernel drops if the
gateway dies. What a dead gateway left running (a docker container until
`conclave sandbox gc` removes it) may then share its uid with a new sandbox; it still runs in
a pid namespace of its own there.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from sandbox.backend import SandboxStartError
from sandbox.host_locks import LOCK_ROOT, open_lock_file

FIRST_SANDBOX_UID = 0x6000_0000
SANDBOX_UID_COUNT = 65_536
DEFAULT_LOCK_DIR = LOCK_ROOT / "uids"


class SandboxUids:
    """Claims and releases the uids of one pool's live sandboxes."""

    def __init__(
        self,
        first: int = FIRST_SANDBOX_UID,
        count: int = SANDBOX_UID_COUNT,
        lock_dir: Path = DEFAULT_LOCK_DIR,
    ) -> None:
        self.first, self.count, self.lock_dir = first, count, lock_dir
        self._held: dict[int, int] = {}  # uid -> the descriptor holding its lock

    def claim(self) -> int:
        """The lowest uid of the range no live sandbox on this host holds, now held by us."""
        for uid in range(self.first, self.first + self.count):
            if uid in self._held:
                continue
            fd = open_lock_file(self.lock_dir, str(uid))
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)  # another gateway's live sandbox holds it
                continue
            self._held[uid] = fd
            return uid
        raise SandboxStartError(
            f"all {self.count} sandbox uids from {self.first} are held by live sandboxes: "
            "lower CONCLAVE_SANDBOX_MAX_TOTAL, or stop another gateway on this host"
        )

    def release(self, uid: int) -> None:
        """Give `uid` back; only once no process of its sandbox is left."""
        fd = self._held.pop(uid, None)
        if fd is not None:
            os.close(fd)  # closing drops the lock

    def live(self) -> set[int]:
        return set(self._held)
