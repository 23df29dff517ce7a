"""A server the bench or a test starts in a child process: up when it listens, gone on exit.

Run in its own process so the server under test, the client measuring it and the gateway in
between do not share one event loop.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence


@contextlib.contextmanager
def running_child_server(
    module_argv: Sequence[str], port: int, timeout_s: float = 30.0
) -> Iterator[subprocess.Popen[bytes]]:
    """`python -m <module_argv...>` listening on 127.0.0.1:`port`; stopped on exit."""
    argv = [sys.executable, "-m", *module_argv]
    child = subprocess.Popen(
        argv,
        env={**os.environ, "FASTMCP_SHOW_CLI_BANNER": "false"},
    )
    try:
        wait_listening(port, child, timeout_s, " ".join(module_argv))
        yield child
    finally:
        child.terminate()
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def wait_listening(
    port: int, child: subprocess.Popen[bytes], timeout_s: float, what: str = "the server"
) -> None:
    stop = time.monotonic() + timeout_s
    while time.monotonic() < stop:
        if child.poll() is not None:
            raise RuntimeError(
                f"{what} exited with {child.returncode} before listening on port {port}"
            )
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on port {port} within {timeout_s} s")
