"""Fixtures for the sandbox suites: one pool per backend, invocations, leftover checks."""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from protocol.identity import Principal
from protocol.tools import ToolContext
from sandbox.backend import SandboxBackend
from sandbox.pool import SandboxPool
from sandbox.sandbox_config import DIRECT_POOL, SandboxConfig
from tools.calls import CallLimits, Invocation, Outcome

TOOL_MODULES = ("tools.builtin", "tools.harness.misbehaving")
ISOLATING = ["bwrap", "docker"]
ALL_BACKENDS = ["process", *ISOLATING]

DEFAULT_LIMITS = CallLimits(
    memory_mb=256, cpu_seconds=10, timeout_ms=10_000, max_output_bytes=1 << 20
)


def make_backend(name: str, request: pytest.FixtureRequest) -> SandboxBackend:
    if name == "docker":
        host = request.getfixturevalue("docker_engine")
        from gateway.config import Settings
        from sandbox.backends.docker import DockerBackend

        return DockerBackend(host, Settings().sandbox.image)
    if name == "bwrap":
        request.getfixturevalue("bwrap_available")
        from sandbox.backends.bwrap import BwrapBackend

        return BwrapBackend()
    from sandbox.backends.process import ProcessBackend

    return ProcessBackend()


def invocation(
    tool: str,
    arguments: dict[str, Any] | None = None,
    *,
    agent: str = "alice",
    tenant: str = "acme",
    module: str = "tools.harness.misbehaving",
    **limits: Any,
) -> Invocation:
    principal = Principal(
        tenant=tenant, agent=agent, expires_at=int(time.time()) + 600, token_id="t-1"
    )
    context = ToolContext(
        principal=principal,
        session_id="s-1",
        trace_id="0af7651916cd43dd8448eb211c80319c",
        traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    )
    fitted = CallLimits(**{**DEFAULT_LIMITS.__dict__, **limits})
    return Invocation(tool, f"{module}:{tool}", arguments or {}, context, fitted)


PoolFactory = Callable[..., Awaitable[SandboxPool]]


@pytest.fixture
async def make_pool(request: pytest.FixtureRequest) -> AsyncIterator[PoolFactory]:
    """Build and open pools on the test's backend (`request.param` via `backend_name`); all
    closed after, the last opened first (each pool's task group was entered in turn)."""
    pools: list[SandboxPool] = []
    roots: list[Path] = []

    async def build(
        backend_name: str, *, tool_modules: tuple[str, ...] = TOOL_MODULES, **config: Any
    ) -> SandboxPool:
        """A pool of `DIRECT_POOL`'s configuration, with `config`'s fields changed, whose
        sandboxes import `tool_modules`."""
        # Short enough for a Unix socket path, and outside pytest's 0700 temp tree: the
        # process backend's runner (uid 65534 under root) must pass through to its workspace.
        root = Path(tempfile.mkdtemp(prefix="conclave-pool-"))
        roots.append(root)
        changed = SandboxConfig.model_validate({**DIRECT_POOL.model_dump(), **config})
        backend = make_backend(backend_name, request)
        pool = SandboxPool(backend, changed, tool_modules=tool_modules, workspace_root=root)
        pools.append(await pool.open())
        return pool

    yield build
    for pool in reversed(pools):
        await pool.aclose()
    for root in roots:
        shutil.rmtree(root, ignore_errors=True)


def processes_mentioning(text: str) -> list[int]:
    """Host processes whose command line mentions `text` (a pool's workspace root)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                if text.encode() in cmdline.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


def processes_working_in(root: Path) -> list[int]:
    """Host processes whose working directory is under `root` (a pool's workspace root): a
    sandbox's runner and whatever its tools started, whatever their command line says."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cwd = os.readlink(f"/proc/{entry}/cwd")
        except OSError:
            continue
        if Path(cwd).is_relative_to(root):
            found.append(int(entry))
    return found


def unique_name(prefix: str) -> str:
    """A process name no other test on the host uses at once (15 bytes at most)."""
    return f"{prefix}-{secrets.token_hex(4)}"[:15]


def processes_named(name: str) -> list[int]:
    """Running host processes (zombies left out) whose name (/proc/<pid>/comm) is `name`."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text() if entry.isdigit() else ""
        except OSError:
            continue
        named, _, rest = stat.rpartition(")")
        if named.partition("(")[2] == name and rest.split()[0] != "Z":
            found.append(int(entry))
    return found


def parent_of(pid: int) -> int:
    """The host pid of `pid`'s parent (a call's child's: its runner)."""
    return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])


async def signal_the_runner(pool: SandboxPool, signum: int, **limits: Any) -> Outcome:
    """A call of the harness's `hold_for_host` whose runner the host sends `signum` once the
    call runs (a crash, the OOM killer, a stop): tool code itself cannot signal its runner."""
    answered: list[Outcome] = []
    name = unique_name("held")

    async def call() -> None:
        answered.append(await pool.execute(invocation("hold_for_host", {"name": name}, **limits)))

    async with anyio.create_task_group() as calls:
        calls.start_soon(call)
        with anyio.fail_after(30):
            while not (held := processes_named(name)):  # noqa: ASYNC110 (a host process)
                await anyio.sleep(0.01)
        os.kill(parent_of(held[0]), signum)
    return answered[0]
