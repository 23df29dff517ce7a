"""`auto` and an engine that makes every start slow (issue 43): in a container whose private
Docker engine fell back to the `vfs` storage driver, every container start copies the image
(seconds), so every new identity's first call waits that long. Detection measures one start
of the engine at start-up and picks bubblewrap where the engine is that slow, saying what the
storage driver costs.

The slow engine is the real one behind a Unix socket that holds each container create for
2.5 s, as a vfs engine takes that long. Before: `auto` took docker whatever its starts cost.
"""

from __future__ import annotations

import contextlib
import select
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from gateway.config import Settings
from sandbox.backends.detect import SLOW_START_S, strongest_available

CREATE_DELAY_S = SLOW_START_S + 0.5


@contextlib.contextmanager
def _slow_engine(engine: str) -> Iterator[str]:
    """A Docker host that is `engine`, but holds every container create `CREATE_DELAY_S`."""
    target = engine.removeprefix("unix://")
    path = Path(tempfile.mkdtemp(prefix="conclave-slow-")) / "docker.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(16)
    stop = threading.Event()

    def relay(client: socket.socket) -> None:
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        upstream.connect(target)
        peers = {client: upstream, upstream: client}
        with client, upstream:
            while not stop.is_set():
                readable, _, _ = select.select(list(peers), [], [], 0.2)
                for side in readable:
                    data = side.recv(1 << 16)
                    if not data:
                        return
                    if side is client and b"/containers/create" in data:
                        time.sleep(CREATE_DELAY_S)  # what a vfs engine spends copying
                    peers[side].sendall(data)

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=relay, args=(client,), daemon=True).start()

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    try:
        yield f"unix://{path}"
    finally:
        stop.set()
        server.join()
        listener.close()


def test_auto_picks_bwrap_where_every_docker_start_is_slow(
    docker_engine: str, bwrap_available: None
) -> None:
    image = Settings().sandbox.image
    with _slow_engine(docker_engine) as slow:
        picked = strongest_available(slow, image)
    assert picked.name == "bwrap", picked
    # One line says what the storage driver costs.
    assert "a container starts in" in picked.reason and "storage driver" in picked.reason
    assert "overlay2" in picked.reason  # the real engine's driver, reported as it is
    fast = strongest_available(docker_engine, image)
    assert fast.name == "docker", fast
    assert "a container starts in" in fast.reason
