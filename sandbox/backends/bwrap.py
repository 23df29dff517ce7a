"""The `bwrap` backend: bubblewrap namespaces, a seccomp filter and one cgroup per sandbox.

bwrap runs as root without a user namespace, so the uid the runner runs as is a real host
uid: it builds new pid, network, IPC, UTS, mount (and cgroup) namespaces (no network but a
dead loopback), then `setpriv` drops to the sandbox's own uid (`SandboxSpec.uid`, one no other
live sandbox has) with no capabilities, no supplementary groups and no-new-privileges before
the runner starts. (With a user
namespace, bwrap started by root maps the sandbox's uid to host root.) The runner sees only
read-only binds of the system's /usr, the Python that runs it, the tool code, a private /tmp
and its workspace, runs under the seccomp filter of `sandbox.backends.seccomp`, and dies
with the gateway (`--die-with-parent`). Its cgroup, inside its tenant's (equal CPU shares
between tenants, `sandbox.backends.cgroup`), caps memory (no swap), processes and CPU;
a tiny shell joins the cgroup before exec'ing bwrap, so nothing starts outside it. Teardown:
freeze the cgroup, SIGKILL every process in it (setsid children included), thaw, remove it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
from anyio.abc import Process

from sandbox.backend import (
    SANDBOX_CODE_DIR,
    SANDBOX_RUNNER,
    SANDBOX_WORKSPACE,
    LaunchedSandbox,
    SandboxSpec,
    SandboxStartError,
    user_env,
)
from sandbox.backends.bwrap_binds import system_binds
from sandbox.backends.cgroup import SandboxCgroup, joining, tear_down
from sandbox.backends.seccomp import filter_program
from sandbox.layout import RUNNER_PATH, code_packages, runner_argv
from sandbox.runner import SOCKET_NAME
from tools.calls import StartStage

NAMESPACES = ("--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts")
# What the sandbox's root keeps until `setpriv` drops to the sandbox's uid: changing ids, emptying
# the bounding set, and searching the workspace (0700, the sandbox user's) for `--chdir`.
SETUP_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP", "CAP_DAC_READ_SEARCH")
SETPRIV = "/usr/bin/setpriv"


class BwrapSandbox:
    def __init__(self, sandbox_id: str, process: Process, cgroup: SandboxCgroup) -> None:
        self._id = sandbox_id
        self._process = process
        self.cgroup = cgroup

    @property
    def description(self) -> str:
        return f"bwrap sandbox {self._id} (pid {self._process.pid})"

    launch_stages: tuple[StartStage, ...] = ()  # one spawn, timed by the caller

    async def died(self) -> str:
        return f"bwrap exited with status {await self._process.wait()}"

    async def exit_reason(self) -> str | None:
        code = self._process.returncode
        return None if code is None else f"bwrap exited with status {code}"

    async def oom_kills(self) -> int:
        return self.cgroup.oom_kills()

    async def pids_refusals(self) -> int:
        return self.cgroup.pids_refusals()

    async def kill(self) -> None:
        await tear_down(self.cgroup, self._process)


def bwrap_argv(spec: SandboxSpec, seccomp_fd: int) -> list[str]:
    """bwrap's command line; it reads the compiled seccomp filter from `seccomp_fd`."""
    argv = ["bwrap", *NAMESPACES, "--unshare-cgroup-try", "--die-with-parent", "--new-session"]
    argv += ["--cap-drop", "ALL"]
    for cap in SETUP_CAPS:
        argv += ["--cap-add", cap]
    argv += system_binds()
    argv += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/tmp"]
    # The interpreter and its site-packages, at the same paths (a venv points at its base).
    for prefix in sorted({sys.base_prefix, sys.prefix, str(Path(sys.executable).parent)}):
        if not prefix.startswith("/usr"):
            argv += _ro_bind(prefix, prefix)
    for name, host_path in code_packages(spec.tool_modules).items():
        argv += _ro_bind(str(host_path), f"{SANDBOX_CODE_DIR}/{name}")
    argv += _ro_bind(str(RUNNER_PATH), SANDBOX_RUNNER)
    argv += ["--bind", str(spec.workspace), SANDBOX_WORKSPACE, "--chdir", SANDBOX_WORKSPACE]
    argv += ["--remount-ro", "/"]  # the root bwrap built is a tmpfs: make it read-only too
    argv += ["--clearenv", "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin"]
    argv += ["--setenv", "PYTHONPATH", SANDBOX_CODE_DIR]
    argv += ["--setenv", "CONCLAVE_WORKSPACE", SANDBOX_WORKSPACE]
    for name, value in user_env(SANDBOX_WORKSPACE).items():
        argv += ["--setenv", name, value]
    argv += ["--seccomp", str(seccomp_fd), "--"]
    argv += _drop_to_sandbox_user(spec.uid)
    socket_path = f"{SANDBOX_WORKSPACE}/{SOCKET_NAME}"
    return argv + runner_argv(
        sys.executable, SANDBOX_RUNNER, socket_path, SANDBOX_WORKSPACE, spec.tool_modules
    )


class BwrapBackend:
    name = "bwrap"
    isolates = True
    caps_processes = True  # each sandbox's cgroup

    async def launch(self, spec: SandboxSpec) -> LaunchedSandbox:
        seccomp_fd = _seccomp_file()
        try:
            cgroup = SandboxCgroup(spec.sandbox_id, spec.tenant, spec.cpus)
            cgroup.create(spec.profile)
            argv = joining(cgroup, bwrap_argv(spec, seccomp_fd))
            try:
                process = await anyio.open_process(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=None,
                    pass_fds=(seccomp_fd,),
                )
            except BaseException:
                cgroup.remove()
                raise
        finally:
            os.close(seccomp_fd)  # bwrap holds its own copy
        return BwrapSandbox(spec.sandbox_id, process, cgroup)

    async def open(self) -> None:
        return None

    async def aclose(self) -> None:
        return None


def _ro_bind(source: str, destination: str) -> list[str]:
    """A read-only bind whose missing parents the sandbox user may search: bwrap, run as
    root, would make them 0700 (root's, so the runner could not reach what is mounted)."""
    return ["--dir", str(Path(destination).parent), "--ro-bind", source, destination]


def _drop_to_sandbox_user(uid: int) -> list[str]:
    """The `setpriv` prefix that runs the runner as `uid` with nothing of root left."""
    if not Path(SETPRIV).exists():
        raise SandboxStartError(
            f"{SETPRIV} is missing: the bwrap backend needs it to drop to the sandbox user; "
            "install util-linux, or use the docker backend"
        )
    argv = [SETPRIV, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs"]
    return [*argv, "--bounding-set=-all", "--inh-caps=-all", "--"]


def _seccomp_file() -> int:
    """An in-memory file holding the seccomp filter, positioned for bwrap to read."""
    program = filter_program()
    fd = os.memfd_create("conclave-seccomp")
    try:
        os.write(fd, program)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd
