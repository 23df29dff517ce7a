"""The `docker` backend: one container per sandbox, the runner as its main process.

Every blocking docker SDK call goes through `DockerBackend._blocking`, the one
`anyio.to_thread` seam, which also translates the SDK's exceptions. Containers run the runtime
image (`conclave sandbox build-image`) with no network, a read-only root, a private /tmp,
the workspace read-write, the tool code read-only, memory = memory+swap, a CPU quota, a pids
limit, no capabilities, no-new-privileges, the sandbox's seccomp profile
(`sandbox.backends.seccomp`) and the sandbox's own uid (`SandboxSpec.uid`), in its tenant's
cgroup parent (equal CPU shares between tenants, as bwrap's sandboxes;
`sandbox.backends.cgroup`). A tiny init (docker's `--init`) is pid 1, so the runner is an
ordinary process that can be stopped or killed like anywhere else. Labels name the sandbox,
its identity and the owning process, for `conclave sandbox gc`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import anyio
from docker.errors import DockerException, ImageNotFound, NotFound
from requests.exceptions import RequestException

from sandbox.backend import (
    SANDBOX_CODE_DIR,
    SANDBOX_RUNNER,
    SANDBOX_WORKSPACE,
    LaunchedSandbox,
    RuntimeImageMissing,
    SandboxError,
    SandboxSpec,
    SandboxStartError,
    user_env,
)
from sandbox.backends.cgroup import TENANT_GROUPS, event_count, tenant_group
from sandbox.backends.container_deaths import ContainerDeaths
from sandbox.backends.docker_client import docker_client
from sandbox.backends.seccomp import docker_profile
from sandbox.background import BackgroundWork
from sandbox.layout import RUNNER_PATH, code_packages, runner_argv
from sandbox.runner import SOCKET_NAME
from tools.calls import StartStage

T = TypeVar("T")
LABEL = "conclave.sandbox"
OWNER_LABEL = "conclave.owner_pid"
CGROUP_ROOT = Path("/sys/fs/cgroup")
# How often `exit_reason` may ask for a container's state. A start asks nothing: it waits on
# the engine's death events (`ContainerDeaths`). Each ask is an inspect the engine answers and
# a worker thread decodes: at 0.1 s, a tenant's burst of cold starts polling it under the
# isolation flood cost the gateway 0.06 and the engine 0.05 more cores.
STATUS_EVERY_S = 0.5
# The sandbox's seccomp denials (the same list as bwrap's filter), where written for this
# machine; Docker's default profile elsewhere.
_SECCOMP = docker_profile()
_SECURITY_OPTIONS = ["no-new-privileges", *([f"seccomp={_SECCOMP}"] if _SECCOMP else [])]


def cgroup_parent(tenant: str, driver: str) -> str:
    """The container's cgroup parent: its tenant's group (`sandbox.backends.cgroup`), where
    every tenant has the same CPU shares, so a tenant's containers share one tenant's CPU.
    The systemd driver takes a slice name (the tenant's name hex-coded: a '-' nests)."""
    if driver == "systemd":
        return f"conclave_tenant_{tenant.encode().hex()}.slice"
    return f"/{tenant_group(tenant)}"


class DockerSandbox:
    def __init__(
        self,
        backend: DockerBackend,
        container_id: str,
        sandbox_id: str,
        tenant: str,
        launch_stages: tuple[StartStage, ...] = (),
    ) -> None:
        self._backend = backend
        self.launch_stages = launch_stages  # the engine's create, then its start
        self.container_id = container_id
        self._id = sandbox_id
        self.tenant = tenant
        self._left = False  # `TENANT_GROUPS`, which the launch entered
        self._checked = 0.0
        # The container's group in a v1 hierarchy, on this host (cgroupfs driver).
        self._group = f"{tenant_group(tenant)}/{container_id}"

    @property
    def description(self) -> str:
        return f"docker sandbox {self._id} (container {self.container_id[:12]})"

    async def died(self) -> str:
        return await self._backend.deaths.died(self.container_id)

    async def exit_reason(self) -> str | None:
        if time.monotonic() - self._checked < STATUS_EVERY_S:
            return None
        self._checked = time.monotonic()
        state = await self._backend.container_state(self.container_id)
        if state.get("Running", True):
            return None
        return f"the container exited with {state.get('ExitCode')}: {state.get('Error') or ''}"

    async def oom_kills(self) -> int:
        control = CGROUP_ROOT / "memory" / self._group / "memory.oom_control"
        return await anyio.to_thread.run_sync(event_count, control, "oom_kill")

    async def pids_refusals(self) -> int:
        events = CGROUP_ROOT / "pids" / self._group / "pids.events"
        return await anyio.to_thread.run_sync(event_count, events, "max")

    async def kill(self) -> None:
        await self._backend.remove(self.container_id)
        if not self._left:  # the tenant's group goes with its last sandbox (Docker leaves it)
            self._left = True
            await anyio.to_thread.run_sync(TENANT_GROUPS.leave, self.tenant)


class DockerBackend:
    name = "docker"
    isolates = True
    caps_processes = True  # each container's pids limit

    def __init__(self, docker_host: str, image: str, engine_threads: int = 8) -> None:
        self.docker_host = docker_host
        self.image = image
        self.engine_threads = engine_threads  # `SandboxConfig.engine_threads`
        self._threads: anyio.CapacityLimiter | None = None  # made in the event loop
        # Its containers' deaths, from the engine's event stream: a start never polls.
        self.deaths = ContainerDeaths(docker_host)
        self._work = BackgroundWork("the docker backend")
        self._reading = False
        self._client: Any = None
        self._client_lock = anyio.Lock()
        self._cgroup_driver = "cgroupfs"

    async def _blocking(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """The one seam where the blocking docker SDK runs, in the backend's own bounded pool
        of threads, and its errors are translated."""
        if self._threads is None:
            self._threads = anyio.CapacityLimiter(self.engine_threads)
        try:
            return await anyio.to_thread.run_sync(
                partial(call, *args, **kwargs), limiter=self._threads
            )
        except NotFound as exc:
            if isinstance(exc, ImageNotFound):
                raise sandbox_error_from_docker(exc, self.docker_host, self.image) from exc
            raise  # a container that is gone: the callers expect it
        except DockerException as exc:
            raise sandbox_error_from_docker(exc, self.docker_host, self.image) from exc
        except RequestException as exc:  # the SDK lets its transport's errors through
            raise SandboxStartError(
                f"the Docker engine at {self.docker_host} does not answer"
                f" ({type(exc).__name__}: {exc})"
            ) from exc

    async def _docker(self) -> Any:
        async with self._client_lock:  # concurrent first launches share one client
            if self._client is None:
                client = await self._blocking(docker_client, self.docker_host)
                info = await self._blocking(client.info)
                self._cgroup_driver = str(info.get("CgroupDriver", "cgroupfs"))
                self._client = client
        return self._client

    async def launch(self, spec: SandboxSpec) -> LaunchedSandbox:
        client = await self._docker()
        if not self._reading:  # the engine's death events, read from the first launch on
            self._reading = True
            await self._work.start_forever(self.deaths.read_forever)
        volumes = {
            str(host_path): {"bind": f"{SANDBOX_CODE_DIR}/{name}", "mode": "ro"}
            for name, host_path in code_packages(spec.tool_modules).items()
        }
        volumes[str(RUNNER_PATH)] = {"bind": SANDBOX_RUNNER, "mode": "ro"}
        volumes[str(spec.workspace)] = {"bind": SANDBOX_WORKSPACE, "mode": "rw"}
        socket_path = f"{SANDBOX_WORKSPACE}/{SOCKET_NAME}"
        command = runner_argv(
            "python3", SANDBOX_RUNNER, socket_path, SANDBOX_WORKSPACE, spec.tool_modules
        )
        memory = f"{spec.profile.memory_mb}m"
        TENANT_GROUPS.enter(spec.tenant)  # its group is kept until the container's `kill`
        try:
            asked_ns = time.time_ns()
            # Created, then started: two calls the engine answers, each a stage of the trace.
            container = await self._blocking(
                client.containers.create,
                self.image,
                command,
                name=f"conclave-{spec.sandbox_id}",
                init=True,
                user=f"{spec.uid}:{spec.uid}",  # its own, as its workspace is
                network_mode="none",
                read_only=True,
                tmpfs={"/tmp": "rw,nosuid,nodev,size=64m,mode=1777"},
                volumes=volumes,
                working_dir=SANDBOX_WORKSPACE,
                environment={
                    "PYTHONPATH": SANDBOX_CODE_DIR,
                    "CONCLAVE_WORKSPACE": SANDBOX_WORKSPACE,
                    **user_env(SANDBOX_WORKSPACE),
                },
                mem_limit=memory,
                memswap_limit=memory,
                nano_cpus=int(spec.profile.cpus * 1e9),
                cpuset_cpus=spec.cpus,
                pids_limit=spec.profile.pids,
                cgroup_parent=cgroup_parent(spec.tenant, self._cgroup_driver),
                cap_drop=["ALL"],
                security_opt=_SECURITY_OPTIONS,
                labels={
                    LABEL: "1",
                    "conclave.tenant": spec.tenant,
                    "conclave.agent": spec.agent,
                    "conclave.sandbox_id": spec.sandbox_id,
                    OWNER_LABEL: str(os.getpid()),
                },
            )
            created_ns = time.time_ns()
            self.deaths.watch(container.id)  # before it starts: its death cannot come first
            try:
                await self._blocking(container.start)
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await self.remove(container.id)
                raise
        except BaseException:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(TENANT_GROUPS.leave, spec.tenant)
            raise
        stages = (
            StartStage("engine create", asked_ns, created_ns),
            StartStage("engine start", created_ns, time.time_ns()),
        )
        return DockerSandbox(self, container.id, spec.sandbox_id, spec.tenant, stages)

    async def container_state(self, container_id: str) -> dict[str, Any]:
        client = await self._docker()
        try:
            info = await self._blocking(client.api.inspect_container, container_id)
        except NotFound:
            return {"Running": False, "ExitCode": None, "Error": "the container is gone"}
        state: dict[str, Any] = info.get("State", {})
        return state

    async def remove(self, container_id: str) -> None:
        self.deaths.forget(container_id)
        client = await self._docker()
        try:
            await self._blocking(client.api.remove_container, container_id, force=True)
        except NotFound:
            return

    async def open(self) -> None:
        # A backend may serve one pool after another (the bench's do): a group for each.
        self._work = BackgroundWork("the docker backend")
        self._reading = False
        self.deaths.reopen()
        await self._work.open()

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):  # a teardown begun is finished
            self.deaths.close()
            if self._client is not None:
                await self._blocking(self._client.close)
                self._client = None
        # Outside the shield: a task group is left from the cancel scope it was entered in.
        self._work.cancel()
        await self._work.aclose()


def sandbox_error_from_docker(
    exc: DockerException, docker_host: str | None = None, image: str | None = None
) -> SandboxError:
    """The one translation of the Docker SDK's exceptions into the sandbox's own."""
    if isinstance(exc, ImageNotFound):
        named = f" {image}" if image else ""
        return RuntimeImageMissing(
            f"the sandbox runtime image{named} is missing: run 'conclave sandbox build-image'"
        )
    engine = f"Docker engine at {docker_host}" if docker_host else "the Docker engine"
    return SandboxStartError(
        f"{engine} refused ({type(exc).__name__}: {exc}). Is dockerd running and the image"
        " built ('conclave sandbox build-image')? Or use CONCLAVE_SANDBOX_BACKEND=bwrap"
    )


def remove_orphans(docker_host: str, *, include_live_owners: bool = False) -> list[str]:
    """Remove sandbox containers whose owning process is gone (all of them if asked)."""
    client = docker_client(docker_host)
    removed: list[str] = []
    try:
        for container in client.containers.list(
            ignore_removed=True, all=True, filters={"label": f"{LABEL}=1"}
        ):
            owner = container.labels.get(OWNER_LABEL, "")
            alive = owner.isdigit() and Path(f"/proc/{owner}").exists()
            if alive and not include_live_owners:
                continue
            try:
                container.remove(force=True)
            except NotFound:  # its gateway's teardown or another gc removed it meanwhile
                continue
            removed.append(container.name)
    finally:
        client.close()
    return removed
