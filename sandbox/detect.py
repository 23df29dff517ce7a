"""Which sandbox backend is the strongest this machine can run, and why.

Only isolating backends are candidates: with neither Docker nor bubblewrap, start-up fails
saying what to install. The unisolated `process` backend is never picked, only chosen.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from docker.errors import DockerException, ImageNotFound

from sandbox.backend import SandboxStartError
from sandbox.backends.bwrap_binds import system_binds
from sandbox.docker_client import docker_client

# Strongest first: a container, then namespaces + cgroups. `process` is not a candidate.
STRENGTH_ORDER = ("docker", "bwrap")


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


def strongest_available(docker_host: str, image: str) -> BackendChoice:
    """Docker, else bubblewrap; SandboxStartError naming what to install when neither runs."""
    docker_missing = docker_status(docker_host, image)
    if docker_missing is None:
        return BackendChoice("docker", "Docker engine reachable and runtime image present")
    bwrap_missing = bwrap_status()
    if bwrap_missing is None:
        return BackendChoice("bwrap", f"bubblewrap available; docker unused: {docker_missing}")
    raise SandboxStartError(
        f"no isolating sandbox backend here: {docker_missing}; {bwrap_missing}. Install "
        "Docker or bubblewrap; or, knowing tools then run unisolated, choose the process "
        "backend explicitly (conclave serve --unisolated-process-backend)"
    )
