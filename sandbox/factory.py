"""`create_executor`: the sandbox pool for a configuration, on the backend it names.

The pool is built from the sandbox's own `SandboxConfig` (the gateway's `settings.sandbox`),
the Docker engines it may run on and the tool modules its runner imports; this package does
not import the gateway.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from sandbox.backend import SandboxBackend, SandboxStartError
from sandbox.backends.detect import bwrap_status, docker_status, strongest_available
from sandbox.instance import EgressGate
from sandbox.pool import SandboxPool
from sandbox.sandbox_config import SandboxConfig

log = logging.getLogger("conclave.sandbox")


def create_backend(config: SandboxConfig, engines: Sequence[str]) -> SandboxBackend:
    """The backend `config` names (`auto`: the strongest here) on `engines`, the Docker
    engines (the first one alone unless the backend is docker over several)."""
    choice: str = config.backend
    if choice == "auto":
        picked = strongest_available(engines[0], config.image)
        log.info("sandbox backend %s: %s", picked.name, picked.reason)
        choice = picked.name
    if choice == "docker" and len(engines) > 1:
        capacity = config.engine_capacity or config.pool_max
        return docker_fleet(engines, config.image, capacity, config.engine_threads)
    return backend_named(choice, engines[0], config.image, config.engine_threads)


def docker_fleet(
    docker_hosts: Sequence[str], image: str, capacity: int, engine_threads: int = 8
) -> SandboxBackend:
    """The docker backend over several engines, each of which must answer and hold the image."""
    for host in docker_hosts:
        missing = docker_status(host, image)
        if missing is not None:
            raise SandboxStartError(f"{missing} (engine {host} of CONCLAVE_DOCKER_HOSTS)")
    from sandbox.backends.docker_fleet import DockerFleet

    return DockerFleet(docker_hosts, image, capacity, engine_threads)


def backend_named(
    name: str, docker_host: str, image: str, engine_threads: int = 8
) -> SandboxBackend:
    """The backend called `name`, or SandboxStartError saying what it lacks here."""
    if name == "docker":
        missing = docker_status(docker_host, image)
        if missing is not None:
            raise SandboxStartError(missing)
        from sandbox.backends.docker import DockerBackend

        return DockerBackend(docker_host, image, engine_threads)
    if name == "bwrap":
        missing = bwrap_status()
        if missing is not None:
            raise SandboxStartError(f"{missing}; or use CONCLAVE_SANDBOX_BACKEND=docker")
        from sandbox.backends.bwrap import BwrapBackend

        return BwrapBackend()
    if name == "process":
        from sandbox.backends import ProcessBackend

        return ProcessBackend()
    raise SandboxStartError(f"unknown sandbox backend {name!r}: use docker, bwrap or process")


def create_executor(
    config: SandboxConfig,
    engines: Sequence[str],
    tool_modules: Sequence[str],
    *,
    replace_killed: bool = False,
    egress: EgressGate | None = None,
) -> SandboxPool:
    """The pool `config` describes, on its backend over `engines`, importing `tool_modules`."""
    return SandboxPool(
        create_backend(config, engines),
        config,
        tool_modules=tool_modules,
        replace_killed=replace_killed,
        egress=egress,
    )
