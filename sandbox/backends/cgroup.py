"""One cgroup per sandbox (v1 controllers, or v2 where it is mounted): limits and teardown.

Each sandbox's group sits in its tenant's (`conclave/tenant-<tenant>`, `tenant_group`), and
every tenant's group has the same CPU weight (`TENANT_CPU_SHARES`, v2 `TENANT_CPU_WEIGHT`):
under contention the kernel shares the CPU between tenants equally first, then between one
tenant's sandboxes, so a tenant running many CPU burners gets no more than a tenant running
one. The docker backend puts its containers in the same tenant groups (`cgroup_parent`),
so a tenant's share is one across both backends. A tenant's group is removed with its last
sandbox on the host (`TenantGroups`), never while another gateway process makes one in it.

Limits: memory (and memory+swap, so it cannot swap), process count, CPU quota and, when the
operator keeps some CPUs free of tool code (`SandboxConfig.cpus`), a v1 cpuset. The
process count is the group's own (`pids.max`): unlike RLIMIT_NPROC, which counts every process
of a uid on the host, no other sandbox's processes count against it. A sandbox's first process
joins the group before it execs anything (`joining`), so nothing of it starts outside. Teardown
(`tear_down`) is freeze, SIGKILL every process in the group, thaw: a process that forks or
calls setsid cannot slip out while it is being killed. The methods are synchronous sysfs
writes of a few bytes; the async teardown polls between them.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shlex
import signal
import threading
from pathlib import Path

import anyio
from anyio.abc import Process

from sandbox.backend import SandboxProfile, SandboxStartError
from sandbox.host_locks import LOCK_ROOT, open_lock_file

CGROUP_ROOT = Path("/sys/fs/cgroup")
GROUP_PARENT = "conclave"
CPUSET_ROOT = CGROUP_ROOT / "cpuset"  # v1: the sandboxes' CPUs, when the operator sets them
V1_CONTROLLERS = ("memory", "pids", "cpu", "freezer")
CPU_PERIOD_US = 100_000
TENANT_CPU_SHARES = 1024  # v1 cpu.shares of every tenant's group: equal, the kernel default
TENANT_CPU_WEIGHT = 100  # v2 cpu.weight, the same
V2_CONTROLLERS = ("memory", "pids", "cpu")
TEARDOWN_TIMEOUT_S = 10.0


def tenant_group(tenant: str) -> str:
    """A tenant's group, relative to a hierarchy's root (a tenant name holds no '/')."""
    return f"{GROUP_PARENT}/tenant-{tenant}"


def cgroup_v2() -> bool:
    return (CGROUP_ROOT / "cgroup.controllers").exists()


def cgroups_unavailable() -> str | None:
    """None when this process can make a group per sandbox here; else why it cannot."""
    if os.geteuid() != 0:
        return "the gateway does not run as root"
    if cgroup_v2():
        present = set((CGROUP_ROOT / "cgroup.controllers").read_text().split())
        missing = [c for c in V2_CONTROLLERS if c not in present]
        writable = [CGROUP_ROOT / "cgroup.subtree_control"]
    else:
        missing = [c for c in V1_CONTROLLERS if not (CGROUP_ROOT / c).is_dir()]
        writable = [CGROUP_ROOT / c for c in V1_CONTROLLERS if c not in missing]
    if missing:
        return f"the cgroup controllers {', '.join(missing)} are not mounted at {CGROUP_ROOT}"
    read_only = [str(path) for path in writable if not os.access(path, os.W_OK)]
    if read_only:
        return f"{', '.join(read_only)} cannot be written (mounted read-only?)"
    return None


def tenant_cgroup_dirs(tenant: str) -> dict[str, Path]:
    """The tenant's group in each hierarchy (by controller; "all" for v2)."""
    if cgroup_v2():
        return {"all": CGROUP_ROOT / tenant_group(tenant)}
    return {c: CGROUP_ROOT / c / tenant_group(tenant) for c in V1_CONTROLLERS}


def ensure_tenant_cgroup(tenant: str) -> None:
    """The tenant's group, created with its equal CPU weight if it was not there."""
    dirs = tenant_cgroup_dirs(tenant)
    if "all" in dirs:
        root = dirs["all"].parent
        root.mkdir(exist_ok=True)
        _write(root / "cgroup.subtree_control", "+memory +pids +cpu")
        dirs["all"].mkdir(exist_ok=True)
        _write(dirs["all"] / "cgroup.subtree_control", "+memory +pids +cpu")
        _write(dirs["all"] / "cpu.weight", str(TENANT_CPU_WEIGHT))
        return
    for path in dirs.values():
        path.mkdir(parents=True, exist_ok=True)
    _write(dirs["cpu"] / "cpu.shares", str(TENANT_CPU_SHARES))


def remove_tenant_cgroup(tenant: str) -> None:
    """Remove the tenant's group if it holds no sandbox any more (else leave it)."""
    for path in tenant_cgroup_dirs(tenant).values():
        with contextlib.suppress(OSError):
            path.rmdir()


class TenantGroups:
    """Which tenants this process has live sandboxes of, so a tenant's group is removed only
    when no gateway process on the host has one.

    A process holds a shared `flock` on `<lock dir>/tenant-<tenant>` from before it makes its
    first sandbox of the tenant (its group in the tenant's, or the engine's container in it) to
    after its last one's teardown; then it takes the lock exclusive, without waiting, and
    removes the tenant's group only if it got it. Before, removing an empty tenant group raced
    with another start making a group in it: the engine refused the container ("no such file"),
    or the bwrap start retried."""

    def __init__(self, lock_dir: Path = LOCK_ROOT / "tenant-groups") -> None:
        self.lock_dir = lock_dir
        self._held: dict[str, tuple[int, int]] = {}  # tenant -> (its lock's descriptor, sandboxes)
        self._mutex = threading.Lock()  # teardowns leave from worker threads

    def enter(self, tenant: str) -> None:
        """A sandbox of `tenant` is about to be made: its group stays until the `leave`."""
        with self._mutex:
            fd, sandboxes = self._held.get(tenant, (-1, 0))
            if fd < 0:
                fd = open_lock_file(self.lock_dir, f"tenant-{tenant}")
                fcntl.flock(fd, fcntl.LOCK_SH)  # a removal holds it for its rmdir alone
            self._held[tenant] = (fd, sandboxes + 1)

    def leave(self, tenant: str) -> None:
        """A sandbox of `tenant` is gone: remove the group if it was the host's last."""
        with self._mutex:
            fd, sandboxes = self._held.pop(tenant)
            if sandboxes > 1:
                self._held[tenant] = (fd, sandboxes - 1)
                return
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                remove_tenant_cgroup(tenant)
            except BlockingIOError:
                pass  # another gateway process has a sandbox of the tenant
            finally:
                os.close(fd)

    def held_elsewhere(self, tenant: str) -> bool:
        """Whether a live gateway process holds the tenant's group (`conclave sandbox gc`)."""
        fd = open_lock_file(self.lock_dir, f"tenant-{tenant}")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return False
        except BlockingIOError:
            return True
        finally:
            os.close(fd)


TENANT_GROUPS = TenantGroups()  # the process's: a flock is the process's


def _cpuset_group(group: Path, cpus: str) -> None:
    """Make the sandbox's v1 cpuset group on `cpus`, and each missing parent on its parent's
    CPUs and memory nodes (a v1 cpuset group starts with none, and takes no process then)."""
    levels = [group, *group.parents]
    for path in reversed(levels[: levels.index(CPUSET_ROOT)]):
        path.mkdir(exist_ok=True)
        for name in ("cpuset.mems", "cpuset.cpus"):
            if not (path / name).read_text().strip():
                _write(path / name, (path.parent / name).read_text().strip())
    _write(group / "cpuset.cpus", cpus)


class SandboxCgroup:
    def __init__(self, sandbox_id: str, tenant: str, cpus: str | None = None) -> None:
        """`cpus`: the CPUs it runs on (a cpuset list; None: every CPU)."""
        self.v2 = cgroup_v2()
        self.tenant = tenant
        self._entered = False  # in `TENANT_GROUPS`, from `create` to the `remove` that ends it
        self.cpus = cpus
        self.dirs = {c: path / sandbox_id for c, path in tenant_cgroup_dirs(tenant).items()}
        if cpus is not None and not self.v2:
            self.dirs["cpuset"] = CPUSET_ROOT / tenant_group(tenant) / sandbox_id

    def create(self, profile: SandboxProfile) -> None:
        """The sandbox's group with its limits, in its tenant's group (kept meanwhile)."""
        if self.cpus is not None and (self.v2 or not CPUSET_ROOT.is_dir()):
            raise SandboxStartError(
                "CONCLAVE_SANDBOX_CPUS with the bwrap or process backend needs cgroup v1's "
                "cpuset hierarchy here; the docker backend sets it on either version"
            )
        memory = profile.memory_mb * 1024 * 1024
        quota = int(profile.cpus * CPU_PERIOD_US)
        TENANT_GROUPS.enter(self.tenant)
        self._entered = True
        try:
            ensure_tenant_cgroup(self.tenant)
            if self.v2:
                self.dirs["all"].mkdir()
                group = self.dirs["all"]
                _write(group / "memory.max", str(memory))
                _write(group / "memory.swap.max", "0", optional=True)
                _write(group / "pids.max", str(profile.pids))
                _write(group / "cpu.max", f"{quota} {CPU_PERIOD_US}")
                return
            for controller, path in self.dirs.items():
                if controller != "cpuset":
                    path.mkdir()
            if self.cpus is not None:
                _cpuset_group(self.dirs["cpuset"], self.cpus)
            _write(self.dirs["memory"] / "memory.limit_in_bytes", str(memory))
            _write(self.dirs["memory"] / "memory.memsw.limit_in_bytes", str(memory), optional=True)
            _write(self.dirs["pids"] / "pids.max", str(profile.pids))
            _write(self.dirs["cpu"] / "cpu.cfs_period_us", str(CPU_PERIOD_US))
            _write(self.dirs["cpu"] / "cpu.cfs_quota_us", str(quota))
        except OSError as exc:
            self.remove()
            raise SandboxStartError(
                f"cannot set up the sandbox's cgroup ({exc}): the bwrap and process backends "
                "need root and writable cgroups; use the docker backend"
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
        """Remove the group's directories (and its tenant's, if it was the tenant's last);
        False while processes still hold them."""
        removed = True
        for path in self.dirs.values():
            try:
                path.rmdir()
            except FileNotFoundError:
                continue
            except OSError:
                removed = False
        if removed and self._entered:
            self._entered = False
            TENANT_GROUPS.leave(self.tenant)
        return removed


def joining(cgroup: SandboxCgroup, argv: list[str]) -> list[str]:
    """`argv` run by a tiny shell that first joins `cgroup`: nothing of it starts outside."""
    joins = "; ".join(f"echo $$ > {shlex.quote(str(p))}" for p in cgroup.procs_files)
    return ["/bin/sh", "-c", f'{joins}; exec "$@"', "sh", *argv]


async def tear_down(cgroup: SandboxCgroup, process: Process) -> None:
    """Kill every process in `cgroup` (frozen, so none forks away meanwhile), reap `process`,
    the sandbox's first, and remove the group."""
    with anyio.fail_after(TEARDOWN_TIMEOUT_S):
        cgroup.freeze(True)
        while not cgroup.is_frozen():  # noqa: ASYNC110 (sysfs has no event here)
            await anyio.sleep(0.001)
        cgroup.kill_all()
        cgroup.freeze(False)
        # The first process too, by itself: torn down in its first moments (a call cancelled
        # while its sandbox starts) it may not have joined the group yet, and then nothing
        # above reached it. Once it joined, it forked nothing before.
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
        while not cgroup.remove():
            cgroup.kill_all()
            await anyio.sleep(0.002)


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
