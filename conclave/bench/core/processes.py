"""Processes on this machine found by a marker in their command line: every sandbox backend's
processes are visible here (a container's too, from the host), so a bench or a test can tell
when a tool's processes started and when the last of them is gone."""

from __future__ import annotations

import os
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
