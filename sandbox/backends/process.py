"""The `process` backend: the runner as a plain subprocess with rlimits. It does NOT isolate.

For machines with neither Docker nor bubblewrap. Per-call rlimits and the wall-clock kill
still apply, but tool code sees the host's files, network and processes; the backend says
so loudly when it starts.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys

import anyio
from anyio.abc import Process

from sandbox.backend import LaunchedSandbox, SandboxSpec
from sandbox.channel import SOCKET_NAME
from sandbox.layout import REPO_ROOT, RUNNER_PATH, code_packages, runner_argv

log = logging.getLogger("conclave.sandbox")

WARNING = (
    "sandbox backend 'process' does NOT isolate tools: they run as plain processes with the "
    "gateway's user, files and network. Use docker or bwrap for untrusted tool code."
)


class ProcessSandbox:
    def __init__(self, process: Process) -> None:
        self._process = process

    @property
    def description(self) -> str:
        return f"process sandbox pid {self._process.pid}"

    async def exit_reason(self) -> str | None:
        code = self._process.returncode
        return None if code is None else f"the runner exited with status {code}"

    async def oom_kills(self) -> int:
        return 0

    async def kill(self) -> None:
        # The runner has its own session; its calls have their own groups: kill them all.
        for pid in [*_descendants(self._process.pid), self._process.pid]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        with anyio.fail_after(10):
            await self._process.wait()


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


class ProcessBackend:
    name = "process"
    isolates = False

    def __init__(self) -> None:
        log.warning(WARNING)

    async def launch(self, spec: SandboxSpec) -> LaunchedSandbox:
        roots = {str(path.parent) for path in code_packages(spec.tool_modules).values()}
        pythonpath = os.pathsep.join([str(REPO_ROOT), *sorted(roots - {str(REPO_ROOT)})])
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "PYTHONPATH": pythonpath,
            "CONCLAVE_WORKSPACE": str(spec.workspace),
            "HOME": str(spec.workspace),
        }
        argv = runner_argv(
            sys.executable,
            str(RUNNER_PATH),
            str(spec.workspace / SOCKET_NAME),
            str(spec.workspace),
            spec.tool_modules,
        )
        process = await anyio.open_process(
            argv,
            cwd=spec.workspace,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=None,
            start_new_session=True,
        )
        return ProcessSandbox(process)

    async def aclose(self) -> None:
        return None
