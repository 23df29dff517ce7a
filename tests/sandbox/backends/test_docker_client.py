"""The Docker client against an engine that is gone or wrong: no file descriptor left per
attempt."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from docker.errors import DockerException
from requests.exceptions import ConnectionError as RequestsConnectionError

from sandbox.backends.docker_client import docker_client
from tests.helpers import wait_for

ATTEMPTS = 3


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


@contextmanager
def _engine(kind: str, path: Path) -> Iterator[list[int]]:
    """An engine socket at `path` that is missing, refuses, or answers the version question
    without a version; yields a one-item count of the connections it has closed."""
    closed = [0]
    if kind == "refusing":
        path.touch()  # a socket file with nothing listening behind it refuses
    if kind != "wrong":
        yield closed
        return
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(ATTEMPTS)

    def answer_wrongly() -> None:
        for _ in range(ATTEMPTS):
            conn, _ = listener.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
            closed[0] += 1

    server = threading.Thread(target=answer_wrongly, daemon=True)
    server.start()
    try:
        yield closed
    finally:
        listener.close()
        server.join(timeout=10)


@pytest.mark.parametrize("engine", ["missing", "refusing", "wrong"])
def test_a_client_that_cannot_learn_the_engines_version_leaves_no_descriptor(
    engine: str, tmp_path: Path
) -> None:
    """Without a fixed API version the client asks the engine for it while it is built; when
    that failed (engine gone, refusing, or answering nonsense) the socket it used stayed open:
    every health check or start against such an engine left a descriptor behind."""
    path = tmp_path / "docker.sock"
    with _engine(engine, path) as closed:
        before = _open_fds()
        failures = []
        for _ in range(ATTEMPTS):
            with pytest.raises(DockerException) as failure:
                docker_client(f"unix://{path}", timeout=10)
            failures.append(failure.value)  # kept: its traceback holds the client's frames
        if engine == "wrong":  # its own ends of the connections are not the client's to count
            wait_for(lambda: closed[0] == ATTEMPTS, 10, "the engine closed its connections")
        assert _open_fds() == before, failures
