"""Sandboxes that run tools: backends, the warm pool and the in-sandbox runner."""

from sandbox.backend import (
    LaunchedSandbox,
    RuntimeImageMissing,
    SandboxBackend,
    SandboxError,
    SandboxProfile,
    SandboxSpec,
    SandboxStartError,
)
from sandbox.executor import NOT_RUN, CallLimits, Invocation, Outcome, ToolExecutor
from sandbox.factory import create_backend, create_executor
from sandbox.inprocess import InProcessExecutor
from sandbox.instance import Sandbox
from sandbox.pool import PoolFullError, SandboxPool, profile_for
from sandbox.time_limit import TimeLimit, fit_timeout, gateway_wait_s, stop_by
from sandbox.unavailable import unavailable_error

__all__ = [
    "NOT_RUN",
    "CallLimits",
    "InProcessExecutor",
    "Invocation",
    "LaunchedSandbox",
    "Outcome",
    "PoolFullError",
    "RuntimeImageMissing",
    "Sandbox",
    "SandboxBackend",
    "SandboxError",
    "SandboxPool",
    "SandboxProfile",
    "SandboxSpec",
    "SandboxStartError",
    "TimeLimit",
    "ToolExecutor",
    "create_backend",
    "create_executor",
    "fit_timeout",
    "gateway_wait_s",
    "profile_for",
    "stop_by",
    "unavailable_error",
]
