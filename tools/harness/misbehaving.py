"""Misbehaving tools for the sandbox's adversarial tests and the benchmark.

Registered only when `tools.harness.misbehaving` is listed in the tool modules: never serve these to
real agents. Each one does what an attacker's or a buggy tool's code would do.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from typing import Any

from protocol import ResourceIntent, ToolContext
from tools.registry import tool

_BIG = ResourceIntent(memory_mb=1024, cpu_seconds=30, timeout_ms=60_000, max_output_bytes=1 << 24)


@tool(intent=_BIG)
def whoami(ctx: ToolContext | None = None) -> dict[str, Any]:
    """Who and where the tool runs, and the context the gateway injected."""
    return {
        "uid": os.getuid(),
        "pid": os.getpid(),
        "cwd": os.getcwd(),
        "agent": ctx.principal.agent if ctx else None,
        "tenant": ctx.principal.tenant if ctx else None,
        "trace_id": ctx.trace_id if ctx else None,
    }


@tool(intent=_BIG)
def fork_bomb() -> int:
    """Fork without end."""
    while True:
        os.fork()


@tool(intent=_BIG)
def allocate(megabytes: int) -> int:
    """Allocate and touch this much memory."""
    block = bytearray(megabytes * 1024 * 1024)
    for offset in range(0, len(block), 4096):
        block[offset] = 1
    return len(block)


@tool(intent=_BIG)
def allocate_in_children(processes: int, megabytes: int) -> int:
    """Fork children that each allocate this much: together past the sandbox's ceiling."""
    children = []
    for _ in range(processes):
        pid = os.fork()
        if pid == 0:
            block = bytearray(megabytes * 1024 * 1024)
            for offset in range(0, len(block), 4096):
                block[offset] = 1
            time.sleep(3600)
            os._exit(0)
        children.append(pid)
    for pid in children:
        _, status = os.waitpid(pid, 0)
        if os.WIFSIGNALED(status):
            raise RuntimeError(f"child {pid} was killed by signal {os.WTERMSIG(status)}")
    return processes


@tool(intent=_BIG)
def spin(seconds: float = 3600.0) -> int:
    """Burn CPU for this long (default: practically forever)."""
    end, turns = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        turns += 1
    return turns


@tool(intent=_BIG)
def sleep(seconds: float) -> float:
    """Sleep without using CPU."""
    time.sleep(seconds)
    return seconds


@tool(intent=_BIG)
def write_path(path: str, content: str = "pwned") -> str:
    """Write anywhere (it should only work inside the workspace)."""
    with open(path, "w") as handle:
        handle.write(content)
    return path


@tool(intent=_BIG)
def read_path(path: str) -> str:
    """Read any file (the host's should not be visible)."""
    with open(path) as handle:
        return handle.read()


@tool(intent=_BIG)
def connect(host: str, port: int) -> str:
    """Open a TCP connection (sandboxes have no network)."""
    with socket.create_connection((host, port), timeout=2):
        return "connected"


@tool(intent=_BIG)
def spawn_detached(seconds: float = 3600.0) -> int:
    """Start a child in its own session that tries to outlive the call; returns its pid."""
    child = subprocess.Popen(["sleep", str(seconds)], start_new_session=True)
    return child.pid


@tool(intent=_BIG)
def spawn_then_hang(seconds: float = 3600.0) -> None:
    """Start a detached child, note its pid in `hang.pid` (in the workspace), then hang."""
    child = subprocess.Popen(["sleep", str(seconds)], start_new_session=True)
    with open("hang.pid", "w") as handle:
        handle.write(str(child.pid))
    time.sleep(seconds)


@tool(intent=_BIG)
def is_alive(pid: int) -> bool:
    """Whether a process with this pid exists (and is not a zombie) in the sandbox."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


@tool(intent=_BIG)
def hold_for_host(name: str) -> None:
    """Name this call's process `name` (at most 15 bytes: /proc/<pid>/comm) and wait: a test
    stops or kills its runner from the host, as a crash or the OOM killer would (tool code
    cannot signal its runner: `sandbox.runner.runner_guard`)."""
    import ctypes

    ctypes.CDLL(None).prctl(15, name.encode()[:15], 0, 0, 0)  # PR_SET_NAME
    time.sleep(3600)


@tool(intent=_BIG)
def big_output(size: int) -> str:
    """Return a string of this many characters."""
    return "x" * size


@tool(intent=_BIG)
def fail(message: str) -> None:
    """Raise an error from tool code."""
    raise RuntimeError(message)
