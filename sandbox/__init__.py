"""Sandboxes that run tools: backends, the warm pool and the in-sandbox runner. The call
contract they implement (`Invocation`, `Outcome`, `ToolExecutor`, `CallEvents`, a call's time
limit) is `tools.calls`', below this package (docs/architecture.md, "Where a tool runs").

| where | holds |
|---|---|
| `pool/` | the warm pool (`SandboxPool`) and its admission: shares, queue, spares, idle sandboxes |
| `instance/` | one running sandbox: its runner's channel, a call's frames and reply, workspace |
| `backends/` | docker, bwrap, process; which are available (`detect`), the Docker client, `gc` |
| `images/` | the runtime image and per-source dependency layers (docker) |
| `runner/` | the in-sandbox runner, standard library only, mounted whole |
| `backend` | what every backend implements (`SandboxBackend`), a sandbox's spec and errors |
| `sandbox_config` | the operator's caps, queue, spares and workspace quota (`SandboxConfig`) |
| `factory` | the backend and the executor the configuration names |
| `inprocess` | the `inprocess` backend's executor: tools run in the gateway's process |
| `layout` | which host files a sandbox mounts and the command that starts its runner |
| `unavailable` | a sandbox's failure to start or run, as the SERF error its caller gets |
| `background` | the task group that owns a part's work off the callers' path |
"""

from sandbox.backend import (
    LaunchedSandbox,
    RuntimeImageMissing,
    SandboxBackend,
    SandboxError,
    SandboxProfile,
    SandboxSpec,
    SandboxStartError,
    WorkspaceQuota,
)
from sandbox.backends.detect import BackendChoice, bwrap_status, docker_status, strongest_available
from sandbox.backends.docker_client import docker_client
from sandbox.backends.gc import collect_orphans
from sandbox.factory import backend_named, create_backend, create_executor
from sandbox.images import ImageBuildError, RuntimeImageBuilder, node_layer, source_layer
from sandbox.inprocess import InProcessExecutor
from sandbox.instance import DEFAULT_WORKSPACE_ROOT, Sandbox
from sandbox.pool import PoolFullError, SandboxPool, profile_for
from sandbox.sandbox_config import SandboxChoice, SandboxConfig
from sandbox.unavailable import unavailable_error

__all__ = [
    "DEFAULT_WORKSPACE_ROOT",
    "BackendChoice",
    "ImageBuildError",
    "InProcessExecutor",
    "LaunchedSandbox",
    "PoolFullError",
    "RuntimeImageBuilder",
    "RuntimeImageMissing",
    "Sandbox",
    "SandboxBackend",
    "SandboxChoice",
    "SandboxConfig",
    "SandboxError",
    "SandboxPool",
    "SandboxProfile",
    "SandboxSpec",
    "SandboxStartError",
    "WorkspaceQuota",
    "backend_named",
    "bwrap_status",
    "collect_orphans",
    "create_backend",
    "create_executor",
    "docker_client",
    "docker_status",
    "node_layer",
    "profile_for",
    "source_layer",
    "strongest_available",
    "unavailable_error",
]
