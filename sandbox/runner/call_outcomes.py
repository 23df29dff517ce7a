"""A call's outcome, as the runner decides it: the reply's exit reason, usage and error.

A child that delivered its result: only `ok` with its result, or the tool's exception (type
names, message, a `ToolArgumentsError`'s hints, the traceback from the tool's side, shown by
the gateway to the tools' author alone), is read from its payload (`classify_result`); any
code, usage or other field it carries is ignored. A child that did not: its death is
classified by what the runner saw (`classify_death`: cancelled, timeout, output cap, CPU
limit, a signal). Errors are `{"code", "message", "details"}` with SERF codes.
"""

from __future__ import annotations

import json
import math
import os
import signal
from typing import Any

from . import runner_wire as wire

OUTPUT = wire.OUTPUT
OUT_OF_MEMORY = b'{"ok":false,"error":{"mro":["MemoryError"],"message":"out of memory"}}'
# The runner's own frames (the child, the invoke) are left out of a tool's traceback.
_RUNNER_DIR = os.path.dirname(os.path.abspath(__file__))


def classify_death(
    killed_for: str | None,
    status: int,
    limits: dict[str, Any],
    usage: dict[str, Any],
    overshoot_ms: float,
) -> dict[str, Any]:
    """The outcome of a child that did not deliver a complete result."""
    if killed_for == "cancelled":
        error = call_error(
            "CANCELLED", "the call was cancelled by its caller; its processes were killed"
        )
        return {"reason": "cancelled", "usage": usage, "error": error}
    if killed_for == "timeout":
        message = f"the call ran past its wall-clock limit of {limits['timeout_ms']} ms"
        details = {"timeout_ms": limits["timeout_ms"], "kill_overshoot_ms": overshoot_ms}
        error = call_error("TOOL_TIMEOUT", message, details)
        return {"reason": "timeout", "usage": usage, "error": error}
    if killed_for == "output":
        message = (
            f"the result exceeded the output cap of {limits['max_output_bytes']} bytes; "
            "ask for less output (page through it, or write it to a workspace file)"
        )
        details = {"max_output_bytes": limits["max_output_bytes"]}
        error = call_error("SANDBOX_OUTPUT_LIMIT", message, details)
        return {"reason": "killed", "usage": usage, "error": error}
    if os.WIFSIGNALED(status):
        return _classify_signal(os.WTERMSIG(status), limits, usage)
    message = f"the call's process exited (status {os.waitstatus_to_exitcode(status)})"
    return {"reason": "killed", "usage": usage, "error": call_error("SANDBOX_KILLED", message)}


def classify_result(
    payload: bytes, limits: dict[str, Any], usage: dict[str, Any]
) -> dict[str, Any]:
    """The outcome of a complete result from the child, with the usage the runner measured.

    Only `ok` with its `result`, or the tool's exception (type names, message, hints), is
    read from the payload: tool code can write this frame itself, so the code, the exit
    reason and the usage are the runner's alone."""
    try:
        body = json.loads(payload)
    except ValueError:
        body = None
    if not isinstance(body, dict):
        error = call_error("TOOL_FAILED", "the tool's result could not be read as JSON")
        return {"reason": "error", "usage": usage, "error": error}
    if body.get("ok") is True:
        if OUTPUT in body:
            return {"reason": "ok", "usage": usage, OUTPUT: body[OUTPUT]}
        return {"reason": "ok", "usage": usage, "result": body.get("result")}
    claimed = body.get("error")
    raised = claimed if isinstance(claimed, dict) else {}
    names = raised.get("mro")
    mro = [str(name) for name in names[:64]] if isinstance(names, list) else []
    message = str(raised.get("message", ""))[:2000]
    hints = raised.get("hints")
    if isinstance(hints, dict):  # tools.ToolArgumentsError
        param_hints = {str(k): str(v) for k, v in hints.items()}
        error = {"code": "INVALID_ARGUMENTS", "message": message, "param_hints": param_hints}
        return {"reason": "error", "usage": usage, "error": error}
    if "MemoryError" in mro:
        return {"reason": "oom", "usage": usage, "error": _oom_error(limits, usage)}
    # The host maps the exception to a SERF code by these names (tools.tool_exceptions).
    name = mro[0] if mro else "Exception"
    details = {"type": name, "message": message, "mro": mro}
    told = raised.get("traceback")
    if isinstance(told, str):  # the gateway shows it to the tool's author alone
        details["traceback"] = told[-MAX_TRACEBACK - 3 :]
    error = call_error("TOOL_FAILED", f"{name}: {message}", details)
    return {"reason": "error", "usage": usage, "error": error}


def _classify_signal(signum: int, limits: dict[str, Any], usage: dict[str, Any]) -> dict[str, Any]:
    cpu_limit_ms = max(1, math.ceil(float(limits["cpu_seconds"]))) * 1000
    if signum == signal.SIGXCPU or (signum == signal.SIGKILL and usage["cpu_ms"] >= cpu_limit_ms):
        message = (
            f"the call used its {limits['cpu_seconds']} s of CPU and was stopped; "
            "ask for less work per call or a larger cpu_seconds limit"
        )
        error = call_error("SANDBOX_CPU_LIMIT", message, {"cpu_seconds": limits["cpu_seconds"]})
        return {"reason": "killed", "usage": usage, "error": error}
    message = f"the call's process was killed by signal {signal.Signals(signum).name}"
    return {"reason": "killed", "usage": usage, "error": call_error("SANDBOX_KILLED", message)}


def _oom_error(limits: dict[str, Any], usage: dict[str, Any]) -> dict[str, Any]:
    peak_mb = usage["peak_rss_kb"] / 1024
    message = (
        f"the call ran out of memory at its {limits['memory_mb']} MB limit "
        f"(peak resident {peak_mb:.0f} MB); ask for less work per call, or a larger memory_mb "
        "within the tool's intent"
    )
    details = {"memory_mb": limits["memory_mb"], "peak_rss_kb": usage["peak_rss_kb"]}
    return call_error("SANDBOX_OOM", message, details)


def call_error(code: str, message: Any, details: dict[str, Any] | None = None) -> dict[str, Any]:
    text = message if isinstance(message, str) else f"{type(message).__name__}: {message}"
    return {"code": code, "message": text, "details": details or {}}


def exception_of(exc: BaseException) -> dict[str, Any]:
    """What the child says of the tool's exception: its type's names, message, hints, and its
    traceback from the tool's side (the runner's own frames left out)."""
    report: dict[str, Any] = {
        "mro": [cls.__name__ for cls in type(exc).__mro__],
        "message": str(exc)[:2000],
        "traceback": _tool_traceback(exc),
    }
    hints = getattr(exc, "hints", None)
    if isinstance(exc, ValueError) and isinstance(hints, dict):  # tools.ToolArgumentsError
        report["hints"] = hints
    return report


MAX_TRACEBACK = 8000  # characters, its end kept: the innermost frames say where it failed


def _tool_traceback(exc: BaseException) -> str:
    import traceback  # only a failed call's child pays for it

    tb = exc.__traceback__
    while tb is not None and os.path.dirname(tb.tb_frame.f_code.co_filename) == _RUNNER_DIR:
        tb = tb.tb_next  # the runner's frames (the child, the invoke): not the tool's
    text = "".join(traceback.format_exception(type(exc), exc, tb))
    return text if len(text) <= MAX_TRACEBACK else "..." + text[-MAX_TRACEBACK:]


def reply(request: dict[str, Any], reason: str, **fields: Any) -> dict[str, Any]:
    return {"type": wire.RESULT, "id": request.get("id"), "exit_reason": reason, **fields}
