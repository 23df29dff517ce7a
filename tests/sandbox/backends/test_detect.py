"""Backend detection: the bubblewrap probe is not thrown off by a Docker engine beside it."""

from __future__ import annotations

import threading

import docker

from gateway.config import Settings
from sandbox.backends.detect import bwrap_status


def test_the_bwrap_probe_passes_while_containers_start_and_stop_beside_it(
    docker_engine: str, bwrap_available: None
) -> None:
    """CI found bwrap "unavailable" while other tests' containers came and went: the probe
    bound the host's whole root, whose recursive read-only remount fails (EINVAL) on an
    overlay mount the engine is setting up or tearing down at that moment."""
    client = docker.DockerClient(base_url=docker_engine)
    image = Settings().sandbox.image
    stop = threading.Event()
    churned: list[int] = []

    def churn() -> None:
        while not stop.is_set():
            client.containers.run(image, ["true"], remove=True, network_mode="none")
            churned.append(1)

    churners = [threading.Thread(target=churn) for _ in range(4)]
    for thread in churners:
        thread.start()
    try:
        failures: list[str] = []
        while len(churned) < 40:  # probes all the while 40 containers come and go
            status = bwrap_status()
            if status is not None:
                failures.append(status)
    finally:
        stop.set()
        for thread in churners:
            thread.join()
        client.close()
    assert failures == []
