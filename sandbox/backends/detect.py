"""Which sandbox backend is the strongest this machine can run, and why.

Only isolating backends are candidates: with neither Docker nor bubblewrap, start-up fails
saying what to install. The unisolated `process` backend is never picked, only chosen.

Docker is the strongest, unless its engine makes every start slow: an engine on the `vfs`
storage driver (nested engines in containers and CI runners fall back to it) copies the whole
image at each container start, seconds where `overlay2` takes a fraction of one. So the
engine's start is measured once per process (a throwaway container of the runtime image,
created, started and removed) and, past `SLOW_START_S`, bubblewrap is picked where it runs;
the choice's reason says what the storage driver costs.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from docker.errors import DockerException, ImageNotFound

from sandbox.backend import SandboxStartError
from sandbox.backends.bwrap_binds import system_binds
from sandbox.backends.docker_client import docker_client

# Strongest first: a container, then namespaces + cgroups. `process` is not a candidate.
STRENGTH_ORDER = ("docker", "bwrap")
# A container start past this (create, start and end of `true`) makes every new identity's
# first call slow: bubblewrap, where it runs, is picked instead. overlay2 here: ~0.25 s.
SLOW_START_S = 2.0


@dataclass(frozen=True)
class BackendChoice:
    name: str
    reason: str


def docker_status(docker_host: str, image: str) -> str | None:
    """None when the engine answers and has the runtime image; else what is missing."""
    if docker_host.startswith("unix://") and not Path(docker_host[len("unix://") :]).exists():
        # Checked first: a missing socket is said so, without a connect attempt.
        return f"Docker engine not reachable at {docker_host}: start dockerd, or use bwrap"
    try:
        client = docker_client(docker_host)
    except DockerException as exc:
        return f"Docker engine not reachable ({exc.__class__.__name__})"
    try:
        client.ping()
        client.images.get(image)
    except ImageNotFound:
        return f"Docker image {image} is missing: run 'conclave sandbox build-image'"
    except DockerException as exc:
        return f"Docker engine not reachable ({exc.__class__.__name__})"
    finally:
        client.close()
    return None


def bwrap_status() -> str | None:
    """None when bubblewrap can start a namespace here; else why not."""
    if shutil.which("bwrap") is None:
        return "bubblewrap is not installed (apt-get install bubblewrap)"
    # The same namespaces and mounts the bwrap backend asks for: a fresh /proc in particular
    # fails inside containers that mask /proc, where a bare `bwrap true` still succeeds.
    probe = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", *system_binds()]
    probe += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "/usr/bin/true"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap failed to start ({exc})"
    if done.returncode != 0:
        return f"bubblewrap cannot create namespaces here: {done.stderr.decode().strip()}"
    return None


@functools.lru_cache(maxsize=8)
def docker_start_cost(docker_host: str, image: str) -> tuple[float, str]:
    """Seconds the engine takes to create, start and remove a container of `image` running
    `true`, and its storage driver; measured once per process and engine."""
    client = docker_client(docker_host)
    try:
        driver = str(client.info().get("Driver", "unknown"))
        began = time.monotonic()
        # Labelled as a sandbox of this process: `conclave sandbox gc` removes it if this
        # process dies before it does.
        labels = {"conclave.sandbox": "1", "conclave.owner_pid": str(os.getpid())}
        container = client.containers.create(image, ["true"], network_mode="none", labels=labels)
        try:
            container.start()
            container.wait(timeout=60)
        finally:
            container.remove(force=True)
        return time.monotonic() - began, driver
    finally:
        client.close()


def strongest_available(docker_host: str, image: str) -> BackendChoice:
    """Docker, else bubblewrap; SandboxStartError naming what to install when neither runs.
    Bubblewrap before Docker when the engine makes every start slow (`SLOW_START_S`)."""
    docker_missing = docker_status(docker_host, image)
    if docker_missing is None:
        try:
            took_s, driver = docker_start_cost(docker_host, image)
        except DockerException as exc:
            docker_missing = f"Docker engine could not start a container ({exc})"
        else:
            cost = f"a container starts in {took_s:.2f} s on its {driver} storage driver"
            if took_s > SLOW_START_S and bwrap_status() is None:
                return BackendChoice(
                    "bwrap",
                    f"bubblewrap available; docker unused: {cost}, every start that slow "
                    f"(over {SLOW_START_S:.0f} s: the {driver} driver copies the image each "
                    "time; overlay2 does not)",
                )
            reason = f"Docker engine reachable and runtime image present; {cost}"
            return BackendChoice("docker", reason)
    bwrap_missing = bwrap_status()
    if bwrap_missing is None:
        return BackendChoice("bwrap", f"bubblewrap available; docker unused: {docker_missing}")
    raise SandboxStartError(
        f"no isolating sandbox backend here: {docker_missing}; {bwrap_missing}. Install "
        "Docker or bubblewrap; or, knowing tools then run unisolated, choose the process "
        "backend explicitly (conclave serve --unisolated-process-backend)"
    )
