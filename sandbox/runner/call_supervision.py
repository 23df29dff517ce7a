"""Supervision and limits: a call's child under its rlimits, watched until it answers or dies.

`apply_limits` sets the call's rlimits in its child (address space on top of the runner's
own, CPU seconds, file size and, for an unprivileged user, process count). `supervise`
collects the child's result until it is complete, the child dies, the wall-clock deadline
passes, the output overflows or the host cancels the call, and measures the usage itself (its
own clock, the child's /proc entries or `wait4`): tool code can write the result pipe, so its
word counts for nothing but the result. The runner is its processes' subreaper:
`sweep_orphans` kills what a call left behind, a detached (setsid) child included.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import resource
import select
import signal
import struct
import time
from typing import Any

from .call_outcomes import classify_death, classify_result
from .frames import EventRelay, HostWatch, read_some

FILE_SIZE_LIMIT = 1024 * 1024 * 1024  # a call may write at most 1 GiB per file
PR_SET_CHILD_SUBREAPER = 36
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
RESULT_HEADER = struct.Struct(">Q")  # a child's result: its length, then the JSON
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
LIBC = ctypes.CDLL(None, use_errno=True)


def apply_limits(limits: dict[str, Any], baseline_vm: int) -> None:
    address_space = baseline_vm + int(limits["memory_mb"]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    cpu = max(1, math.ceil(float(limits["cpu_seconds"])))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))
    # Past the file-size limit a write fails with EFBIG (a tool error) instead of a kill.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    processes = limits.get("max_processes")
    if processes and os.getuid() != 0:  # RLIMIT_NPROC does not bind root
        resource.setrlimit(resource.RLIMIT_NPROC, (int(processes), int(processes)))


def supervise(
    pid: int,
    read_fd: int,
    started: float,
    limits: dict[str, Any],
    watch: HostWatch | None = None,
    events: EventRelay | None = None,
) -> tuple[dict[str, Any], bool]:
    """Collect the child's result until it is complete, the child dies, the deadline passes,
    the output overflows or the host cancels the call, forwarding its events meanwhile. True
    with the outcome when the child still has to be reaped."""
    deadline = started + int(limits["timeout_ms"]) / 1000
    cap = int(limits["max_output_bytes"])
    os.set_blocking(read_fd, False)
    poller = select.poll()
    poller.register(read_fd, select.POLLIN)
    poller.register(CHILD_EXITS.read_fd, select.POLLIN)
    if watch is not None:
        poller.register(watch.fd, select.POLLIN)
    if events is not None:
        poller.register(events.fd, select.POLLIN)
    buffer = bytearray()
    killed_for, overshoot_ms = None, 0.0
    exited = CHILD_EXITS.exited(pid)  # it may have died before we started looking
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            killed_for, overshoot_ms = "timeout", (time.monotonic() - deadline) * 1000
            break
        # A look at the child's exit at least every half second, SIGCHLD or not.
        ready = poller.poll(max(1, math.ceil(min(remaining, 0.5) * 1000)))
        if not ready:
            exited = CHILD_EXITS.exited(pid)
        for fd, event_mask in ready:
            if watch is not None and fd == watch.fd:
                if watch.cancels():
                    killed_for = "cancelled"
            elif fd == CHILD_EXITS.read_fd:
                exited = CHILD_EXITS.exited(pid)
            elif events is not None and fd == events.fd:
                events.drain()
                if not (event_mask & select.POLLIN):  # the pipe's writers are all gone
                    poller.unregister(events.fd)
            elif not (chunk := read_some(read_fd)):
                poller.unregister(read_fd)
            else:
                buffer += chunk
        if killed_for is not None:
            break
        if exited:
            while (chunk := read_some(read_fd)) and len(buffer) <= cap + RESULT_HEADER.size:
                buffer += chunk
        expected = (
            RESULT_HEADER.unpack_from(buffer)[0] if len(buffer) >= RESULT_HEADER.size else None
        )
        if expected is not None and expected > cap:
            killed_for = "output"
            break
        if expected is not None and len(buffer) >= RESULT_HEADER.size + expected:
            # Complete: answer now; the child's exit (address-space teardown) is reaped later.
            os.close(read_fd)
            if events is not None:  # what it reported before its result goes first
                events.drain()
            wall_ms = (time.monotonic() - started) * 1000
            measured, unreaped = _measure_answered(pid)
            payload = bytes(buffer[RESULT_HEADER.size : RESULT_HEADER.size + expected])
            return classify_result(payload, limits, {"wall_ms": wall_ms, **measured}), unreaped
        if exited:
            break
    if killed_for is not None:
        kill_group(pid)
    _, status, usage = os.wait4(pid, 0)
    ended = time.monotonic()
    os.close(read_fd)
    measured = {
        "wall_ms": (ended - started) * 1000,
        "cpu_ms": (usage.ru_utime + usage.ru_stime) * 1000,
        "peak_rss_kb": usage.ru_maxrss,
    }
    return classify_death(killed_for, status, limits, measured, overshoot_ms), False


def _measure_answered(pid: int) -> tuple[dict[str, Any], bool]:
    """CPU ms and peak RSS of a child that delivered its result, by the runner's own reading
    (never the child's word); True when the child still has to be reaped. A child still
    running is read from /proc, without waiting for it; one whose memory is already gone is
    reaped here (it runs no code any more, so its rusage is final and the wait is brief)."""
    peak_kb, fields = None, None
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        with open(f"/proc/{pid}/status") as status:
            peak_kb = next((int(ln.split()[1]) for ln in status if ln.startswith("VmHWM:")), None)
    if fields is not None and peak_kb is not None:
        ticks = sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
        return {"cpu_ms": ticks * 1000 / CLOCK_TICKS, "peak_rss_kb": peak_kb}, True
    reaped, _, usage = os.wait4(pid, 0 if fields is not None else os.WNOHANG)
    if not reaped:
        return {"cpu_ms": 0.0, "peak_rss_kb": 0}, True
    cpu_ms = (usage.ru_utime + usage.ru_stime) * 1000
    return {"cpu_ms": cpu_ms, "peak_rss_kb": usage.ru_maxrss}, False


class ChildExits:
    """Wakes the runner when a child exits: SIGCHLD writes to a pipe it polls (`read_fd`).

    Not a pidfd: `pidfd_open` is denied in the sandbox (with it, tool code could take the
    runner's descriptors by `pidfd_getfd`). A call's child resets all of this at fork."""

    def __init__(self) -> None:
        self.read_fd, self.write_fd = -1, -1

    def install(self) -> None:
        self.read_fd, self.write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        signal.set_wakeup_fd(self.write_fd, warn_on_full_buffer=False)

    def uninstall_in_child(self) -> None:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in (self.read_fd, self.write_fd):
            if fd >= 0:
                os.close(fd)

    def exited(self, pid: int) -> bool:
        """Whether `pid` has exited (left unreaped); drains the wake-ups seen so far."""
        while read_some(self.read_fd):
            pass
        try:
            found = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        return found is not None


CHILD_EXITS = ChildExits()


def kill_group(pid: int) -> None:
    for kill in (os.killpg, os.kill):
        with contextlib.suppress(ProcessLookupError):
            kill(pid, signal.SIGKILL)


def _children() -> list[int]:
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children") as listing:
            return [int(p) for p in listing.read().split()]
    except OSError:
        return []


def sweep_orphans(keep: set[int] | None = None) -> None:
    """Kill whatever the call left behind (but `keep`): as subreaper, every orphan is our
    child."""
    for _ in range(100):
        children = [child for child in _children() if child not in (keep or set())]
        if not children:
            return
        for child in children:
            for kill in (os.killpg, os.kill):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    kill(child, signal.SIGKILL)
        for child in children:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(child, 0)
