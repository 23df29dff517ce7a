"""One cgroup per sandbox (v1 controllers, or v2 where it is mounted): limits and teardown.

Limits: memory (and memory+swap, so it cannot swap), process count and CPU quota. Teardown
is freeze, SIGKILL every process in the group, thaw: a process that forks or calls setsid
cannot slip out while it is being killed. The methods are synchronous sysfs writes of a few
bytes; the async caller polls between them.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

from sandbox.backend import SandboxProfile, SandboxStartError

CGROUP_ROOT = Path("/sys/fs/cgroup")
GROUP_PARENT = "conclave"
V1_CONTROLLERS = ("memory", "pids", "cpu", "freezer")
CPU_PERIOD_US = 100_000


def cgroup_v2() -> bool:
    return (CGROUP_ROOT / "cgroup.controllers").exists()


class SandboxCgroup:
    def __init__(self, sandbox_id: str) -> None:
        self.v2 = cgroup_v2()
        if self.v2:
            self.dirs = {"all": CGROUP_ROOT / GROUP_PARENT / sandbox_id}
        else:
            self.dirs = {c: CGROUP_ROOT / c / GROUP_PARENT / sandbox_id for c in V1_CONTROLLERS}

    def create(self, profile: SandboxProfile) -> None:
        memory = profile.memory_mb * 1024 * 1024
        quota = int(profile.cpus * CPU_PERIOD_US)
        try:
            if self.v2:
                parent = self.dirs["all"].parent
                parent.mkdir(exist_ok=True)
                _write(parent / "cgroup.subtree_control", "+memory +pids +cpu")
                self.dirs["all"].mkdir()
                group = self.dirs["all"]
                _write(group / "memory.max", str(memory))
                _write(group / "memory.swap.max", "0", optional=True)
                _write(group / "pids.max", str(profile.pids))
                _write(group / "cpu.max", f"{quota} {CPU_PERIOD_US}")
                return
            for path in self.dirs.values():
                path.mkdir(parents=True)
            _write(self.dirs["memory"] / "memory.limit_in_bytes", str(memory))
            _write(self.dirs["memory"] / "memory.memsw.limit_in_bytes", str(memory), optional=True)
            _write(self.dirs["pids"] / "pids.max", str(profile.pids))
            _write(self.dirs["cpu"] / "cpu.cfs_period_us", str(CPU_PERIOD_US))
            _write(self.dirs["cpu"] / "cpu.cfs_quota_us", str(quota))
        except OSError as exc:
            self.remove()
            raise SandboxStartError(
                f"cannot set up the sandbox's cgroup ({exc}): bwrap needs root and writable "
                "cgroups; use the docker backend, or process (no isolation)"
            ) from exc

    @property
    def procs_files(self) -> list[Path]:
        """The files a process writes its pid to, to join every controller."""
        return [path / "cgroup.procs" for path in self.dirs.values()]

    def pids(self) -> list[int]:
        found: set[int] = set()
        for path in self.procs_files:
            with contextlib.suppress(OSError):
                found.update(int(p) for p in path.read_text().split())
        return sorted(found)

    def oom_kills(self) -> int:
        name = "memory.events" if self.v2 else "memory.oom_control"
        group = self.dirs["all" if self.v2 else "memory"]
        return event_count(group / name, "oom_kill")

    def pids_refusals(self) -> int:
        group = self.dirs["all" if self.v2 else "pids"]
        return event_count(group / "pids.events", "max")

    def freeze(self, frozen: bool) -> None:
        if self.v2:
            _write(self.dirs["all"] / "cgroup.freeze", "1" if frozen else "0", optional=True)
        else:
            state = "FROZEN" if frozen else "THAWED"
            _write(self.dirs["freezer"] / "freezer.state", state, optional=True)

    def is_frozen(self) -> bool:
        with contextlib.suppress(OSError):
            if self.v2:
                return "frozen 1" in (self.dirs["all"] / "cgroup.events").read_text()
            return (self.dirs["freezer"] / "freezer.state").read_text().strip() == "FROZEN"
        return True  # nothing to wait for

    def kill_all(self) -> None:
        if self.v2 and (self.dirs["all"] / "cgroup.kill").exists():
            _write(self.dirs["all"] / "cgroup.kill", "1")
            return
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def remove(self) -> bool:
        """Remove the group's directories; False while processes still hold them."""
        removed = True
        for path in self.dirs.values():
            try:
                path.rmdir()
            except FileNotFoundError:
                continue
            except OSError:
                removed = False
        return removed


def _write(path: Path, value: str, *, optional: bool = False) -> None:
    try:
        path.write_text(value)
    except OSError:
        if not optional:
            raise


def event_count(events: Path, key: str) -> int:
    """The count of `key` in a cgroup's events file (`<key> <count>` lines); 0 if unreadable."""
    with contextlib.suppress(OSError, ValueError):
        for line in events.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    return 0
