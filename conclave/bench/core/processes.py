"""Processes on this machine found by a marker in their command line: every sandbox backend's
processes are visible here (a container's too, from the host), so a bench or a test can tell
when a tool's processes started and when the last of them is gone. And what processes cost:
the CPU time a bench's gateways used, read from `/proc`."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path


def processes_with(marker: str) -> list[int]:
    """Live processes whose command line holds `marker`, this one left out (zombies are gone:
    a zombie has let go of everything it held)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline and alive(int(entry)):
            found.append(int(entry))
    return found


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def children() -> set[int]:
    """The pids of this process's children (the gateways it started)."""
    pids: set[int] = set()
    for listing in Path("/proc/self/task").glob("*/children"):
        pids.update(int(pid) for pid in listing.read_text().split())
    return pids


def cpu_seconds(pids: Iterable[int]) -> float:
    """User and system CPU seconds the processes `pids` have used so far (none for one gone)."""
    ticks = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")
