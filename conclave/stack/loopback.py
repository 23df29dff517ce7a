"""Whether a host is reachable from this machine only: shared by the stack (which refuses a
wider bind on generated secrets) and the CLI (which reads a local gateway's admin key)."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or localhost: reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name: it may resolve to anything
