"""Free TCP ports on the loopback interface, for the servers the bench and the tests start."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port nothing listens on now (the kernel's pick; another process may take it later)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port
