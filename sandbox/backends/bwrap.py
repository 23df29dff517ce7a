"""The `bwrap` backend: bubblewrap namespaces plus one cgroup per sandbox.

The runner runs as uid 65534 in new user, pid, network, IPC, UTS and mount namespaces
(`--unshare-all`: no network but a dead loopback), sees only read-only binds of the system's
/usr, the Python that runs it, the tool code, a private /tmp and its workspace, and dies with
the gateway (`--die-with-parent`). Its cgroup caps memory (no swap), processes and CPU; a
tiny shell joins the cgroup before exec'ing bwrap, so nothing starts outside it. Teardown:
freeze the cgroup, SIGKILL every process in it (setsid children included), thaw, remove it.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import anyio
from anyio.abc import Process

from sandbox.backend import (
    SANDBOX_CODE_DIR,
    SANDBOX_RUNNER,
    SANDBOX_UID,
    SANDBOX_WORKSPACE,
    LaunchedSandbox,
    SandboxSpec,
)
from sandbox.backends.cgroup import SandboxCgroup
from sandbox.channel import SOCKET_NAME
from sandbox.layout import RUNNER_PATH, code_packages, runner_argv

SYSTEM_BINDS = ("/usr", "/etc/ld.so.cache", "/etc/alternatives")
TEARDOWN_TIMEOUT_S = 10.0


class BwrapSandbox:
    def __init__(self, sandbox_id: str, process: Process, cgroup: SandboxCgroup) -> None:
        self._id = sandbox_id
        self._process = process
        self.cgroup = cgroup

    @property
    def description(self) -> str:
        return f"bwrap sandbox {self._id} (pid {self._process.pid})"

    async def exit_reason(self) -> str | None:
        code = self._process.returncode
        return None if code is None else f"bwrap exited with status {code}"

    async def oom_kills(self) -> int:
        return self.cgroup.oom_kills()

    async def kill(self) -> None:
        with anyio.fail_after(TEARDOWN_TIMEOUT_S):
            self.cgroup.freeze(True)
            while not self.cgroup.is_frozen():  # noqa: ASYNC110 (sysfs has no event here)
                await anyio.sleep(0.001)
            self.cgroup.kill_all()
            self.cgroup.freeze(False)
            await self._process.wait()
            while not self.cgroup.remove():
                self.cgroup.kill_all()
                await anyio.sleep(0.002)


def bwrap_argv(spec: SandboxSpec) -> list[str]:
    argv = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session"]
    argv += ["--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
    for path in SYSTEM_BINDS:
        argv += ["--ro-bind-try", path, path]
    for link in ("bin", "lib", "lib64", "sbin"):
        target = Path("/", link)
        if target.is_symlink():
            argv += ["--symlink", str(target.readlink()), str(target)]
        elif target.exists():
            argv += ["--ro-bind", str(target), str(target)]
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    # The interpreter and its site-packages, at the same paths (a venv points at its base).
    for prefix in sorted({sys.base_prefix, sys.prefix, str(Path(sys.executable).parent)}):
        if not prefix.startswith("/usr"):
            argv += ["--ro-bind", prefix, prefix]
    for name, host_path in code_packages(spec.tool_modules).items():
        argv += ["--ro-bind", str(host_path), f"{SANDBOX_CODE_DIR}/{name}"]
    argv += ["--ro-bind", str(RUNNER_PATH), SANDBOX_RUNNER]
    argv += ["--bind", str(spec.workspace), SANDBOX_WORKSPACE, "--chdir", SANDBOX_WORKSPACE]
    argv += ["--remount-ro", "/"]  # the root bwrap built is a tmpfs: make it read-only too
    argv += ["--clearenv", "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin"]
    argv += ["--setenv", "PYTHONPATH", SANDBOX_CODE_DIR, "--setenv", "HOME", SANDBOX_WORKSPACE]
    argv += ["--setenv", "CONCLAVE_WORKSPACE", SANDBOX_WORKSPACE, "--"]
    socket_path = f"{SANDBOX_WORKSPACE}/{SOCKET_NAME}"
    return argv + runner_argv(
        sys.executable, SANDBOX_RUNNER, socket_path, SANDBOX_WORKSPACE, spec.tool_modules
    )


class BwrapBackend:
    name = "bwrap"
    isolates = True

    async def launch(self, spec: SandboxSpec) -> LaunchedSandbox:
        cgroup = SandboxCgroup(spec.sandbox_id)
        cgroup.create(spec.profile)
        joins = "; ".join(f"echo $$ > {shlex.quote(str(p))}" for p in cgroup.procs_files)
        argv = ["/bin/sh", "-c", f'{joins}; exec "$@"', "sh", *bwrap_argv(spec)]
        try:
            process = await anyio.open_process(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=None
            )
        except BaseException:
            cgroup.remove()
            raise
        return BwrapSandbox(spec.sandbox_id, process, cgroup)

    async def aclose(self) -> None:
        return None
