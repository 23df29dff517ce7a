"""What a sandbox backend is: something that starts a runner in isolation and tears it down.

A backend turns a `SandboxSpec` (who it is for, its limits profile, its workspace) into a
`LaunchedSandbox`: a runner that will connect to the workspace's socket. Everything above
(connecting, calls, the pool) is shared, so one conformance suite covers every backend.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

import anyio

from tools.calls import StartStage

# Where the tool code and the workspace appear inside an isolating sandbox.
SANDBOX_CODE_DIR = "/opt/conclave/code"
SANDBOX_RUNNER = "/opt/conclave/runner"  # the runner folder (`sandbox/runner/`), mounted whole
SANDBOX_WORKSPACE = "/workspace"
SANDBOX_UID = 65534  # nobody: what a spec made outside a pool runs as
SANDBOX_USER = "sandbox"  # the name tool code is told it runs as


def user_env(home: str) -> dict[str, str]:
    """Who the tool code runs as, for the libraries that ask: a sandbox's uid is its own and
    in no passwd file, so asking the system fails (`getpass.getuser()` raised KeyError), while
    LOGNAME and USER are read first."""
    return {"HOME": home, "USER": SANDBOX_USER, "LOGNAME": SANDBOX_USER}


class SandboxError(Exception):
    """Root of the sandbox package's errors; `sandbox.unavailable` turns them into SERF."""

    # When a later call may find it mended (a sandbox started, a pool with room); None: no
    # retry helps.
    retry_after_ms: int | None = 1000


class SandboxStartError(SandboxError):
    """A sandbox could not be started; the message names the fix."""


class EngineLost(SandboxError):
    """The engine running the sandbox stopped answering: a retry is placed on another one."""

    retry_after_ms = 100


class RuntimeImageMissing(SandboxStartError):
    """The Docker runtime image is not there: no retry helps until it is built."""

    retry_after_ms = None


@dataclass(frozen=True)
class SandboxProfile:
    """The ceiling a sandbox runs under; each call's own limits sit below it."""

    memory_mb: int
    cpus: float = 1.0
    pids: int = 128
    # Its tools have network rights: only then is the egress proxy's socket attached (each
    # socket holds gateway descriptors that a sandbox without rights has no use for).
    egress: bool = False


@dataclass(frozen=True)
class WorkspaceQuota:
    """How much one sandbox's workspace may hold (`sandbox.instance.workspace` mounts it)."""

    size_mb: int
    inodes: int


@dataclass(frozen=True)
class SandboxSpec:
    sandbox_id: str
    tenant: str
    agent: str
    profile: SandboxProfile
    workspace: Path  # on the host; mounted read-write at SANDBOX_WORKSPACE
    tool_modules: tuple[str, ...]
    workspace_quota: WorkspaceQuota | None = None  # None: the workspace is not bounded
    cpus: str | None = None  # the CPUs it runs on, a cpuset list (`SandboxConfig.cpus`)
    # The host uid its runner and tools run as, its own while it lives (`sandbox.pool`'s
    # `SandboxUids`); the workspace is its.
    uid: int = SANDBOX_UID


class LaunchedSandbox(Protocol):
    """A started sandbox whose runner is about to connect."""

    @property
    def description(self) -> str: ...

    @property
    def launch_stages(self) -> tuple[StartStage, ...]:
        """The engine's stages of the launch, where it has several (docker: create, start);
        empty: the launch is one stage, timed by its caller."""
        ...

    async def died(self) -> str:
        """Wait until the sandbox dies, and say why: a start races it against the runner's
        hello. It waits on the process (bwrap, process) or the engine's events (docker), never
        by asking the engine again and again."""
        ...

    async def exit_reason(self) -> str | None:
        """Why the sandbox already died (for startup errors); None while it runs."""
        ...

    async def oom_kills(self) -> int:
        """How many processes the kernel's OOM killer has killed in it (0 if unknown)."""
        ...

    async def pids_refusals(self) -> int:
        """How many forks its process limit has refused (0 if unknown)."""
        ...

    async def kill(self) -> None:
        """Tear down every process of the sandbox and release what it holds."""
        ...


class SandboxBackend(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def isolates(self) -> bool: ...

    @property
    def caps_processes(self) -> bool:
        """Whether each sandbox's process count is capped on its own (its cgroup's or its
        container's pids limit). False: the runner caps it with RLIMIT_NPROC, which counts
        every process of the runner's uid on the host, other sandboxes' included."""
        ...

    async def open(self) -> None:
        """Enter what the backend runs in the background (a task group), in the task that
        will `aclose` it; the pool opens its backend before its own group, and closes it after."""
        ...

    async def launch(self, spec: SandboxSpec) -> LaunchedSandbox: ...

    async def aclose(self) -> None:
        """Release backend-wide resources (clients); sandboxes are killed by their owner. A
        teardown begun is finished even if the caller is cancelled (the backend shields it)."""
        ...


@runtime_checkable
class EngineBound(Protocol):
    """A launched sandbox on an engine that can stop answering (the docker fleet's): its
    calls end with `EngineLost` once `engine_lost` is set."""

    @property
    def engine_lost(self) -> anyio.Event: ...
