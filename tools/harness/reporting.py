"""Test tools that report while they run: progress and log messages through their context.

Not served unless `tools.harness.reporting` is listed in `CONCLAVE_TOOL_MODULES`. They run in
the sandbox like any tool; what they report crosses the runner's wire as the call's events.
"""

from __future__ import annotations

import subprocess

from protocol import ResourceIntent, ToolContext
from tools.registry import tool

_SMALL = ResourceIntent(memory_mb=128, cpu_seconds=10, timeout_ms=30_000)
_ECHO = ResourceIntent(memory_mb=64, cpu_seconds=1, timeout_ms=2_000)  # as `echo`'s


@tool(read_only=True, idempotent=True, intent=_SMALL)
def countdown(steps: int, ctx: ToolContext) -> str:
    """Count `steps` down, reporting progress at each step and one log message per level
    (debug, info, warning)."""
    ctx.log("debug", {"said": "debug details"}, logger="countdown")
    ctx.log("info", "counting down", logger="countdown")
    for step in range(1, steps + 1):
        ctx.report_progress(step, steps, f"step {step} of {steps}")
    ctx.log("warning", "lift-off", logger="countdown")
    return f"counted {steps}"


@tool(read_only=True, idempotent=True, cheap=True, intent=_ECHO)
def echo_with_progress(message: str, ctx: ToolContext) -> str:
    """`echo` that reports its progress once first: the least a call that streams does (a
    caller that sent a `progressToken` is answered with an event stream; `conclave bench
    gateway` measures it against a plain `echo`)."""
    ctx.report_progress(1, 1)
    return message


@tool(read_only=True, idempotent=True, intent=_SMALL)
def progress_then_sleep(seconds: str, ctx: ToolContext) -> str:
    """Report progress once, then run `sleep <seconds>` (a process a test can find by its
    argument), for a client that leaves mid-stream."""
    ctx.report_progress(0, 1, "started")
    subprocess.run(["sleep", seconds], check=True)
    return "slept"


@tool(read_only=True, idempotent=True, intent=_SMALL)
def chatter(messages: int, size: int, ctx: ToolContext) -> str:
    """Log `messages` warnings of `size` characters each: more and larger than a call may
    send."""
    for index in range(messages):
        ctx.log("warning", f"{index}:" + "x" * size)
    return "said it all"
