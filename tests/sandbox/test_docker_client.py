"""The Docker client against an engine that is gone: no file descriptor left per attempt."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from requests.exceptions import ConnectionError as RequestsConnectionError

from sandbox.docker_client import docker_client


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("engine", ["missing", "refusing"])
def test_failed_connects_to_an_engine_socket_leave_no_descriptor(
    engine: str, tmp_path: Path
) -> None:
    """A restarting engine's socket is missing, then refuses; each failed call used to keep
    its socket open (until the garbage collector found it, with a ResourceWarning)."""
    path = tmp_path / "docker.sock"
    if engine == "refusing":
        path.touch()  # a socket file with nothing listening behind it refuses
    client = docker_client(f"unix://{path}", timeout=2, version="1.41")
    failures = []
    before = _open_fds()
    for _ in range(5):
        with pytest.raises(RequestsConnectionError) as failure:
            client.ping()
        failures.append(failure.value)  # kept: its traceback holds the failed connect's frame
    assert _open_fds() == before
    client.close()
