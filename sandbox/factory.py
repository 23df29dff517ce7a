"""`create_executor`: the sandbox pool for a configuration, on the backend it names.

The settings object is the gateway's `Settings`; only the fields below are read, so this
package does not import the gateway.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from sandbox.backend import SandboxBackend, SandboxStartError, WorkspaceQuota
from sandbox.detect import bwrap_status, docker_status, strongest_available
from sandbox.instance import EgressGate
from sandbox.pool import SandboxPool, profile_for_memory

log = logging.getLogger("conclave.sandbox")


class SandboxSettings(Protocol):
    @property
    def sandbox_backend(self) -> str: ...
    @property
    def docker_host(self) -> str: ...
    @property
    def sandbox_image(self) -> str: ...
    @property
    def engine_hosts(self) -> tuple[str, ...]: ...
    @property
    def sandbox_engine_capacity(self) -> int | None: ...
    @property
    def tool_modules(self) -> tuple[str, ...]: ...
    @property
    def sandbox_pool_max(self) -> int: ...
    @property
    def sandbox_tenant_max(self) -> int | None: ...
    @property
    def sandbox_agent_max(self) -> int | None: ...
    @property
    def sandbox_tenant_starts_max(self) -> int: ...
    @property
    def sandbox_queue_ms(self) -> int: ...
    @property
    def sandbox_queue_max(self) -> int: ...
    @property
    def sandbox_idle_s(self) -> float: ...
    @property
    def sandbox_recycle_after(self) -> int: ...
    @property
    def sandbox_spares(self) -> tuple[int, ...] | None: ...
    @property
    def sandbox_workspace_mb(self) -> int: ...
    @property
    def sandbox_workspace_inodes(self) -> int: ...


def create_backend(settings: SandboxSettings) -> SandboxBackend:
    choice = settings.sandbox_backend
    if choice == "auto":
        picked = strongest_available(settings.docker_host, settings.sandbox_image)
        log.info("sandbox backend %s: %s", picked.name, picked.reason)
        choice = picked.name
    if choice == "docker" and len(settings.engine_hosts) > 1:
        capacity = settings.sandbox_engine_capacity or settings.sandbox_pool_max
        return docker_fleet(settings.engine_hosts, settings.sandbox_image, capacity)
    return backend_named(choice, settings.docker_host, settings.sandbox_image)


def docker_fleet(docker_hosts: Sequence[str], image: str, capacity: int) -> SandboxBackend:
    """The docker backend over several engines, each of which must answer and hold the image."""
    for host in docker_hosts:
        missing = docker_status(host, image)
        if missing is not None:
            raise SandboxStartError(f"{missing} (engine {host} of CONCLAVE_DOCKER_HOSTS)")
    from sandbox.backends.docker_fleet import DockerFleet

    return DockerFleet(docker_hosts, image, capacity)


def backend_named(name: str, docker_host: str, image: str) -> SandboxBackend:
    """The backend called `name`, or SandboxStartError saying what it lacks here."""
    if name == "docker":
        missing = docker_status(docker_host, image)
        if missing is not None:
            raise SandboxStartError(missing)
        from sandbox.backends.docker import DockerBackend

        return DockerBackend(docker_host, image)
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
    settings: SandboxSettings, *, replace_killed: bool = False, egress: EgressGate | None = None
) -> SandboxPool:
    spares = settings.sandbox_spares
    return SandboxPool(
        create_backend(settings),
        tool_modules=settings.tool_modules,
        max_sandboxes=settings.sandbox_pool_max,
        tenant_max=settings.sandbox_tenant_max,
        agent_max=settings.sandbox_agent_max,
        queue_ms=settings.sandbox_queue_ms,
        queue_max=settings.sandbox_queue_max,
        tenant_starts_max=settings.sandbox_tenant_starts_max or None,
        idle_s=settings.sandbox_idle_s,
        recycle_after=settings.sandbox_recycle_after,
        replace_killed=replace_killed,
        egress=egress,
        spares=None if spares is None else [profile_for_memory(mb) for mb in spares],
        workspace_quota=workspace_quota(settings),
    )


def workspace_quota(settings: SandboxSettings) -> WorkspaceQuota | None:
    """Each sandbox's workspace quota; None when the operator turned it off (0 MiB)."""
    if settings.sandbox_workspace_mb <= 0:
        return None
    return WorkspaceQuota(settings.sandbox_workspace_mb, settings.sandbox_workspace_inodes)
