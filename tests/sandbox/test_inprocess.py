"""The in-process executor behind the ToolExecutor interface."""

from __future__ import annotations

import threading
import time

import pytest

from protocol import ErrorCode, Principal, ToolContext
from protocol.tools import ExitReason
from sandbox.inprocess import InProcessExecutor
from tools.calls import CallLimits, Invocation
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


@tool(registry=registry, cheap=True)
def thread_of_cheap() -> int:
    """Say which thread runs it."""
    return threading.get_ident()


@tool(registry=registry)
def thread_of_plain() -> int:
    """Say which thread runs it."""
    return threading.get_ident()


@tool(registry=registry, cheap=True)
def cheap_but_failing(count: int) -> int:
    """Fail on zero."""
    return 1 // count


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


async def test_a_cheap_tool_runs_on_the_event_loop_and_any_other_in_a_worker_thread() -> None:
    executor = InProcessExecutor(registry)
    cheap = await executor.execute(_invocation("thread_of_cheap", {}))
    plain = await executor.execute(_invocation("thread_of_plain", {}))
    assert cheap.ok and cheap.result == threading.get_ident()
    assert plain.ok and plain.result != threading.get_ident()
    assert cheap.usage.exit_reason is ExitReason.OK and cheap.usage.sandbox == "inprocess"


async def test_a_cheap_tool_s_failures_are_outcomes_as_any_tool_s() -> None:
    executor = InProcessExecutor(registry)
    failed = await executor.execute(_invocation("cheap_but_failing", {"count": 0}))
    assert failed.error is not None and failed.error.code is ErrorCode.TOOL_FAILED
    assert "ZeroDivisionError" in failed.error.message
    refused = await executor.execute(_invocation("cheap_but_failing", {"count": "x"}))
    assert refused.error is not None and refused.error.code is ErrorCode.INVALID_ARGUMENTS
