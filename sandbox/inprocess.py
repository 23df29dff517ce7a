"""`InProcessExecutor`: runs a registered tool in a worker thread of the gateway's process.

Arguments are validated here, once (`RegisteredTool.invoke`), as the sandbox's runner does.
No isolation at all: it exists to measure the gateway's own overhead (the bench's "direct"
figure) and to serve tools where no sandbox is set up. A timed-out call is answered with
TOOL_TIMEOUT at its deadline, but its thread cannot be killed and runs to its end.

A tool declared `cheap` (trivial, pure, synchronous: `echo`) is called on the event loop
instead: the hop to a worker thread and back (a capacity limiter, a queue, a wake-up of the
loop from the thread) cost more than the call itself, ~13% of the gateway's CPU per echo
(py-spy under load, issue 13). It finishes before any deadline could be checked, so it has
no timeout to enforce.

What a tool reports through its context (progress, logs) goes to the invocation's `events`:
directly from the event loop, through `anyio.from_thread` from a worker thread.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import anyio

from protocol import CallUsage, ErrorCode, ExitReason, LogEvent, ProgressEvent, SerfError
from tools import RegisteredTool, ToolArgumentsError, ToolRegistry, tool_exception_code
from tools.calls import Invocation, Outcome


class InProcessExecutor:
    def __init__(self, registry: ToolRegistry) -> None:
        self.registry = registry

    @property
    def name(self) -> str:
        return "inprocess"

    async def execute(self, invocation: Invocation) -> Outcome:
        began = time.perf_counter()
        registered = self.registry.get(invocation.tool)
        if registered is None:
            return self._fail(began, ErrorCode.TOOL_NOT_FOUND, f"no tool {invocation.tool!r}")
        cpu: list[float] = [0.0]
        threaded = not registered.cheap and not inspect.iscoroutinefunction(registered.function)
        invocation = _reporting(invocation, threaded)
        try:
            if registered.cheap and not inspect.iscoroutinefunction(registered.function):
                result = _call(registered, invocation, cpu, time.perf_counter)
            else:
                with anyio.fail_after(invocation.limits.timeout_ms / 1000):
                    result = await self._run(registered, invocation, cpu)
        except TimeoutError:
            return self._fail(
                began,
                ErrorCode.TOOL_TIMEOUT,
                f"{invocation.tool} ran past its {invocation.limits.timeout_ms} ms limit",
                ExitReason.TIMEOUT,
            )
        except ToolArgumentsError as exc:
            return Outcome(usage=self._usage(began, 0.0, ExitReason.ERROR), error=exc.as_serf())
        except Exception as exc:  # the tool's own failure is its outcome, not ours
            return self._fail(
                began,
                tool_exception_code(exc),
                f"{invocation.tool} raised {type(exc).__name__}: {exc}",
                # as the runner reports it
                details={
                    "type": type(exc).__name__,
                    "mro": [c.__name__ for c in type(exc).__mro__],
                },
            )
        output = registered.result_of(result)
        return Outcome(usage=self._usage(began, cpu[0]), result=output.value, output=output)

    async def _run(
        self, registered: RegisteredTool, invocation: Invocation, cpu: list[float]
    ) -> Any:
        if inspect.iscoroutinefunction(registered.function):
            return await registered.invoke(invocation.arguments, invocation.context)
        return await anyio.to_thread.run_sync(
            _call, registered, invocation, cpu, time.thread_time, abandon_on_cancel=True
        )

    def _usage(self, began: float, cpu_ms: float, reason: ExitReason = ExitReason.OK) -> CallUsage:
        wall_ms = (time.perf_counter() - began) * 1000
        return CallUsage(wall_ms=wall_ms, cpu_ms=cpu_ms, exit_reason=reason, sandbox="inprocess")

    def _fail(
        self,
        began: float,
        code: ErrorCode,
        message: str,
        reason: ExitReason = ExitReason.ERROR,
        details: dict[str, Any] | None = None,
    ) -> Outcome:
        error = SerfError.of(code, message, details=details)
        return Outcome(usage=self._usage(began, 0.0, reason), error=error)

    async def aclose(self) -> None:
        return None


def _reporting(invocation: Invocation, threaded: bool) -> Invocation:
    """The invocation whose context reports to its `events` (from a worker thread if
    `threaded`); unchanged when nobody listens."""
    events = invocation.events
    if events is None:
        return invocation
    if not threaded:
        return replace(invocation, context=invocation.context.reporting_to(events.emit))

    def from_thread(event: ProgressEvent | LogEvent) -> None:
        anyio.from_thread.run_sync(events.emit, event)

    return replace(invocation, context=invocation.context.reporting_to(from_thread))


def _call(
    registered: RegisteredTool,
    invocation: Invocation,
    cpu: list[float],
    clock: Callable[[], float],
) -> Any:
    """The synchronous tool's result; the CPU time it took by `clock` lands in `cpu[0]` (ms).

    A worker thread reads its own CPU clock; on the event loop a cheap call never waits, so its
    wall time is its CPU time, and `perf_counter` spares two system calls a call."""
    start = clock()
    try:
        return registered.invoke(invocation.arguments, invocation.context)
    finally:
        cpu[0] = (clock() - start) * 1000
