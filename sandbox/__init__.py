"""Sandboxes that run tools: backends, the warm pool and the in-sandbox runner."""

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
from sandbox.call_event_sink import MAX_EVENT_BYTES, Ask, CallEvents, answer_deadline
from sandbox.detect import BackendChoice, bwrap_status, docker_status, strongest_available
from sandbox.docker_client import docker_client
from sandbox.executor import NOT_RUN, CallLimits, Invocation, Outcome, ToolExecutor
from sandbox.factory import backend_named, create_backend, create_executor
from sandbox.fair_share import PoolFullError
from sandbox.gc import collect_orphans
from sandbox.idle_watch import Heard, SubscriptionHold
from sandbox.image import ImageBuildError, RuntimeImageBuilder
from sandbox.inprocess import InProcessExecutor
from sandbox.instance import Sandbox
from sandbox.pool import SandboxPool
from sandbox.profiles import profile_for
from sandbox.runner import frame_limit
from sandbox.sandbox_config import SandboxChoice, SandboxConfig
from sandbox.source_layer import node_layer, source_layer
from sandbox.time_limit import (
    TimeLimit,
    fit_timeout,
    gateway_wait_s,
    kill_margin_ms,
    sandbox_deadline_ms,
)
from sandbox.unavailable import unavailable_error
from sandbox.workspace import DEFAULT_ROOT as DEFAULT_WORKSPACE_ROOT

__all__ = [
    "DEFAULT_WORKSPACE_ROOT",
    "MAX_EVENT_BYTES",
    "NOT_RUN",
    "Ask",
    "BackendChoice",
    "CallEvents",
    "CallLimits",
    "Heard",
    "ImageBuildError",
    "InProcessExecutor",
    "Invocation",
    "LaunchedSandbox",
    "Outcome",
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
    "SubscriptionHold",
    "TimeLimit",
    "ToolExecutor",
    "WorkspaceQuota",
    "answer_deadline",
    "backend_named",
    "bwrap_status",
    "collect_orphans",
    "create_backend",
    "create_executor",
    "docker_client",
    "docker_status",
    "fit_timeout",
    "frame_limit",
    "gateway_wait_s",
    "kill_margin_ms",
    "node_layer",
    "profile_for",
    "sandbox_deadline_ms",
    "source_layer",
    "strongest_available",
    "unavailable_error",
]
