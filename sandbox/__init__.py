"""Sandboxes that run tools: backends, the warm pool and the in-sandbox runner."""

from sandbox.backend import (
    LaunchedSandbox,
    SandboxBackend,
    SandboxError,
    SandboxProfile,
    SandboxSpec,
    SandboxStartError,
)
from sandbox.executor import CallLimits, Invocation, Outcome, ToolExecutor
from sandbox.factory import create_backend, create_executor
from sandbox.inprocess import InProcessExecutor
from sandbox.instance import Sandbox
from sandbox.pool import PoolFullError, SandboxPool, profile_for

__all__ = [
    "CallLimits",
    "InProcessExecutor",
    "Invocation",
    "LaunchedSandbox",
    "Outcome",
    "PoolFullError",
    "Sandbox",
    "SandboxBackend",
    "SandboxError",
    "SandboxPool",
    "SandboxProfile",
    "SandboxSpec",
    "SandboxStartError",
    "ToolExecutor",
    "create_backend",
    "create_executor",
    "profile_for",
]
