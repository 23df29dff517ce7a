"""The in-process executor behind the ToolExecutor interface."""

from __future__ import annotations

import time

import pytest

from protocol import ErrorCode, Principal, ToolContext
from protocol.tools import ExitReason
from sandbox.executor import CallLimits, Invocation
from sandbox.inprocess import InProcessExecutor
from tools.registry import ToolRegistry, tool

pytestmark = pytest.mark.anyio

registry = ToolRegistry()


@tool(registry=registry)
def whoami(context: ToolContext) -> str:
    """Say who is calling."""
    return f"{context.principal.tenant}/{context.principal.agent}@{context.session_id}"


@tool(registry=registry)
def explode() -> None:
    """Fail."""
    raise ValueError("kaboom")


@tool(registry=registry)
def dawdle(seconds: float) -> str:
    """Sleep."""
    time.sleep(seconds)
    return "done"


def _invocation(name: str, arguments: dict[str, object], timeout_ms: int = 2000) -> Invocation:
    principal = Principal(tenant="acme", agent="w", expires_at=0, token_id="j")
    context = ToolContext(principal=principal, session_id="s1", trace_id="t" * 32, traceparent="x")
    limits = CallLimits(memory_mb=64, cpu_seconds=1, timeout_ms=timeout_ms, max_output_bytes=1024)
    return Invocation(name, f"tests:{name}", dict(arguments), context, limits)


async def test_the_tool_gets_the_gateway_context() -> None:
    outcome = await InProcessExecutor(registry).execute(_invocation("whoami", {}))
    assert outcome.ok and outcome.result == "acme/w@s1"
    assert outcome.usage.exit_reason is ExitReason.OK and outcome.usage.sandbox == "inprocess"


async def test_a_tool_error_and_a_timeout_are_outcomes_not_exceptions() -> None:
    executor = InProcessExecutor(registry)
    failed = await executor.execute(_invocation("explode", {}))
    assert failed.error is not None and failed.error.code is ErrorCode.TOOL_FAILED
    assert "kaboom" in failed.error.message
    slow = await executor.execute(_invocation("dawdle", {"seconds": 0.5}, timeout_ms=50))
    assert slow.error is not None and slow.error.code is ErrorCode.TOOL_TIMEOUT
    assert slow.usage.exit_reason is ExitReason.TIMEOUT and slow.usage.wall_ms < 400
