"""The `process` backend: the runner as a plain subprocess with rlimits. It does NOT isolate.

Only ever chosen explicitly, never a fall-back. Per-call rlimits and the wall-clock kill
still apply, but tool code sees the host's files, network and processes; the backend says
so loudly when it starts. What it does keep from tools: the gateway's environment (the
runner gets a scrubbed one) and, when the gateway runs as root, everything only root may
read: the runner then runs as its sandbox's own unprivileged uid (`SandboxSpec.uid`, no other
live sandbox's), so the 0600 secret files, /proc/<gateway>/environ and every other
sandbox's processes and workspace are closed to it.

Where the gateway may make cgroups (as root), each sandbox runs in its own, in its tenant's,
as bwrap's do (`sandbox.backends.cgroup`): memory, CPU and, above all, its own process cap.
Teardown is then the cgroup's: freeze, kill all, thaw. Where it may not, the runner falls
back to RLIMIT_NPROC, which counts the uid's processes host-wide: the sandbox's own as root,
the gateway user's (every sandbox's) otherwise, and the start-up warning says so.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import sysconfig
from pathlib import Path

import anyio
from anyio.abc import Process

from sandbox.backend import (
    LaunchedSandbox,
    SandboxSpec,
    SandboxStartError,
    user_env,
)
from sandbox.backends.cgroup import SandboxCgroup, cgroups_unavailable, joining, tear_down
from sandbox.layout import REPO_ROOT, RUNNER_PATH, code_packages, runner_argv
from sandbox.runner import SOCKET_NAME
from tools.calls import StartStage

log = logging.getLogger("conclave.sandbox")

WARNING = (
    "sandbox backend 'process' does NOT isolate tools: they run as plain processes with the "
    "host's files and network. Use docker or bwrap for untrusted tool code."
)
SHARED_CAP_WARNING = (
    "sandbox backend 'process' cannot give each sandbox its own cgroup (%s): a sandbox's "
    "process cap is RLIMIT_NPROC, which counts every process of %s on this host. Run the "
    "gateway as root with writable cgroups for a cap per sandbox."
)

SHARED_UID_WARNING = (
    "sandbox backend 'process' runs every sandbox as the gateway's own uid %d (it is not "
    "root): one sandbox's tools can signal, trace and read another's. Run the gateway as root "
    "for a uid per sandbox, or use docker or bwrap."
)


class ProcessSandbox:
    def __init__(self, process: Process, cgroup: SandboxCgroup | None) -> None:
        self._process = process
        self.cgroup = cgroup

    @property
    def description(self) -> str:
        return f"process sandbox pid {self._process.pid}"

    launch_stages: tuple[StartStage, ...] = ()  # one spawn, timed by the caller

    async def died(self) -> str:
        return f"the runner exited with status {await self._process.wait()}"

    async def exit_reason(self) -> str | None:
        code = self._process.returncode
        return None if code is None else f"the runner exited with status {code}"

    async def oom_kills(self) -> int:
        return 0 if self.cgroup is None else self.cgroup.oom_kills()

    async def pids_refusals(self) -> int:
        # Without a cgroup RLIMIT_NPROC refuses forks: the tool sees EAGAIN, nothing counts it.
        return 0 if self.cgroup is None else self.cgroup.pids_refusals()

    async def kill(self) -> None:
        if self.cgroup is not None:
            await tear_down(self.cgroup, self._process)
            return
        # The runner has its own session; its calls have their own groups: kill them all.
        descendants = _descendants(self._process.pid)
        for pid in [*descendants, self._process.pid]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        with anyio.fail_after(10):
            await self._process.wait()
            # The runner's children die beside it, reaped by init: the sandbox is gone when
            # they are (a SIGKILLed process still runs for a moment; a zombie runs no more).
            while any(_running(pid) for pid in descendants):  # noqa: ASYNC110 (no event to await)
                await anyio.sleep(0.005)


def _running(pid: int) -> bool:
    """Whether `pid` is a process that has not exited (a zombie has)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def _descendants(pid: int) -> list[int]:
    found: list[int] = []
    pending = [pid]
    while pending:
        parent = pending.pop()
        try:
            with open(f"/proc/{parent}/task/{parent}/children") as listing:
                children = [int(p) for p in listing.read().split()]
        except OSError:
            continue
        found += children
        pending += children
    return found


def _reachable_by_others(path: Path) -> bool:
    """Whether a user with no rights of ours (a sandbox's uid) can execute `path`."""
    real = path.resolve()
    return real.is_file() and bool(real.stat().st_mode & 0o001) and _passable_by_others(real)


def _passable_by_others(directory: Path) -> bool:
    """Whether a user with no rights of ours may pass through every directory above this one."""
    return all(parent.stat().st_mode & 0o001 for parent in directory.resolve().parents)


def _unprivileged_interpreter() -> str:
    """Our Python, or the same version elsewhere on PATH when a sandbox's uid cannot reach ours
    (an interpreter under /root, say); our site-packages go on its PYTHONPATH."""
    if _reachable_by_others(Path(sys.executable)):
        return sys.executable
    name = f"python{sys.version_info.major}.{sys.version_info.minor}"
    dirs = [*os.environ.get("PATH", "").split(os.pathsep), "/usr/local/bin", "/usr/bin"]
    for directory in dirs:
        candidate = Path(directory or ".") / name
        if candidate.exists() and _reachable_by_others(candidate):
            return str(candidate)
    raise SandboxStartError(
        "the process backend runs tools as unprivileged uids, which cannot execute "
        f"{sys.executable}: install {name} where every user can run it (e.g. /usr/bin)"
    )


# Drops to the uid in argv[1] (and its gid, no supplementary groups), then execs the rest.
# A launcher, not Popen's user=/group=: uvloop, the gateway's event loop, refuses those.
_DROP_PRIVILEGES = (
    "import os, sys; uid = int(sys.argv[1]); os.setgroups([]); os.setgid(uid); "
    "os.setuid(uid); os.execv(sys.argv[2], sys.argv[2:])"
)


def _as_sandbox_user(uid: int | None) -> list[str]:
    if uid is None:
        return []
    return [sys.executable, "-I", "-S", "-c", _DROP_PRIVILEGES, str(uid)]


class ProcessBackend:
    name = "process"
    isolates = False

    def __init__(self) -> None:
        log.warning(WARNING)
        # As root, each runner runs as its sandbox's own uid (no supplementary groups).
        self._as_root = os.geteuid() == 0
        self._python = _unprivileged_interpreter() if self._as_root else sys.executable
        no_cgroups = cgroups_unavailable()
        self.caps_processes = no_cgroups is None  # else the runner's RLIMIT_NPROC does
        if no_cgroups is not None:
            whose = "its sandbox's uid" if self._as_root else f"uid {os.getuid()} (every sandbox)"
            log.warning(SHARED_CAP_WARNING, no_cgroups, whose)
        if not self._as_root:
            log.warning(SHARED_UID_WARNING, os.getuid())

    async def launch(self, spec: SandboxSpec) -> LaunchedSandbox:
        if self._as_root and not _passable_by_others(spec.workspace):
            raise SandboxStartError(
                f"the process backend runs tools as uid {spec.uid}, which cannot pass "
                f"through to the workspace {spec.workspace}: use a workspace root outside "
                "private directories"
            )
        roots = {str(path.parent) for path in code_packages(spec.tool_modules).values()}
        paths = [str(REPO_ROOT), *sorted(roots - {str(REPO_ROOT)})]
        if self._python != sys.executable:  # another interpreter: give it our packages
            paths += sorted({sysconfig.get_path("purelib"), sysconfig.get_path("platlib")})
        pythonpath = os.pathsep.join(paths)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "PYTHONPATH": pythonpath,
            "CONCLAVE_WORKSPACE": str(spec.workspace),
            **user_env(str(spec.workspace)),
        }
        argv = _as_sandbox_user(spec.uid if self._as_root else None) + runner_argv(
            self._python,
            str(RUNNER_PATH),
            str(spec.workspace / SOCKET_NAME),
            str(spec.workspace),
            spec.tool_modules,
        )
        if spec.cpus is not None and not self.caps_processes:
            raise SandboxStartError(
                "CONCLAVE_SANDBOX_CPUS needs a cgroup per sandbox, which the process backend "
                "makes only as root"
            )
        cgroup = (
            SandboxCgroup(spec.sandbox_id, spec.tenant, spec.cpus) if self.caps_processes else None
        )
        if cgroup is not None:
            cgroup.create(spec.profile)
            argv = joining(cgroup, argv)
        try:
            process = await anyio.open_process(
                argv,
                cwd=spec.workspace,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=None,
                start_new_session=True,
            )
        except BaseException:
            if cgroup is not None:
                cgroup.remove()
            raise
        return ProcessSandbox(process, cgroup)

    async def open(self) -> None:
        return None

    async def aclose(self) -> None:
        return None
