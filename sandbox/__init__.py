"""Sandboxes that run tools: backends, the warm pool and the in-sandbox runner. The call
contract they implement (`Invocation`, `Outcome`, `ToolExecutor`, `CallEvents`, a call's time
limit) is `tools.calls`', below this package."""

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
from sandbox.detect import BackendChoice, bwrap_status, docker_status, strongest_available
from sandbox.docker_client import docker_client
from sandbox.factory import backend_named, create_backend, create_executor
from sandbox.fair_share import PoolFullError
from sandbox.gc import collect_orphans
from sandbox.image import ImageBuildError, RuntimeImageBuilder
from sandbox.inprocess import InProcessExecutor
from sandbox.instance import Sandbox
from sandbox.pool import SandboxPool
from sandbox.profiles import profile_for
from sandbox.runner import frame_limit
from sandbox.sandbox_config import SandboxChoice, SandboxConfig
from sandbox.source_layer import node_layer, source_layer
from sandbox.unavailable import unavailable_error
from sandbox.workspace import DEFAULT_ROOT as DEFAULT_WORKSPACE_ROOT

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
    "frame_limit",
    "node_layer",
    "profile_for",
    "source_layer",
    "strongest_available",
    "unavailable_error",
]
