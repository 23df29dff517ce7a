"""What the host makes of a runner's reply: checked, clamped, and turned into the call's
`Outcome` (`reply_outcome`), with whether the sandbox may serve another call (`CallResult`).

The runner shares its sandbox with tool code, so its report is a claim: the host clamps what
it records to what it granted and saw itself (`clamped_usage`): wall time at most the host's
own measure of the call, CPU at most the call's CPU limit, peak RSS at most the sandbox's
memory ceiling, a kill's lateness at most what the host saw past the limit. A reply for
another call, or whose result is over the call's output cap, is refused (`check_reply`,
`ProtocolViolation`): the sandbox is torn down and the call gets the refusal.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Protocol

from protocol import CallUsage, ErrorCode, ExitReason, SerfError
from sandbox.backend import SandboxSpec
from sandbox.instance.channel import RunnerChannel
from sandbox.instance.workspace import disk_full_error, workspace_is_full
from sandbox.runner import OUTPUT
from tools import ToolResult, ToolResultError, tool_exception_code
from tools.calls import CallLimits, Outcome

# A sandbox is torn down after these. Not after a timeout the runner reported: it killed the
# call's process group and reaped it, and sweeps any orphan before the next call, so the
# sandbox is clean and stays warm for the retry a kill invites. (A runner that does not
# answer is torn down with its sandbox, see `Sandbox._runner_lost`.)
_RECYCLE_REASONS = {ExitReason.OOM, ExitReason.KILLED}


@dataclass
class CallResult:
    """What one call on a sandbox came to, for the pool."""

    outcome: Outcome
    recycle: bool  # the sandbox must not serve another call
    torn_down_at_timeout: bool = False  # the runner did not answer its own kill in time


class ReplyJudge(Protocol):
    """The sandbox a reply came from, as `reply_outcome` reads it."""

    @property
    def spec(self) -> SandboxSpec: ...

    @property
    def label(self) -> str: ...

    async def oom_killed_since_last_look(self) -> bool:
        """The kernel's OOM killer struck in the sandbox since the last look."""
        ...

    async def pids_refused_since_last_look(self) -> bool:
        """A fork was refused at the sandbox's process limit since the last look."""
        ...


class ProtocolViolation(Exception):
    """A reply the host refuses to pass on; `error` is what the call answers instead."""

    def __init__(self, error: SerfError) -> None:
        super().__init__(error.message)
        self.error = error


async def reply_outcome(
    reply: dict[str, Any], limits: CallLimits, wall_ms: float, sandbox: ReplyJudge
) -> CallResult:
    """The call's `Outcome` from the runner's `reply`, clamped to what the host granted and
    saw, with the host's own look at why it failed (an OOM kill, the process cap, a full
    workspace) over the tool's word."""
    measured = clamped_usage(reply.get("usage"), limits, sandbox.spec.profile.memory_mb, wall_ms)
    reason = ExitReason(reply.get("exit_reason", "error"))
    raw_error = reply.get("error")
    if raw_error is not None and await sandbox.oom_killed_since_last_look():
        # The kernel's OOM killer struck at the sandbox's ceiling (several processes of
        # the call together, each under its own limit): whatever the tool then reported,
        # the cause is memory.
        reason = ExitReason.OOM
        raw_error = {
            "code": "SANDBOX_OOM",
            "message": (
                f"the call was OOM-killed at the sandbox's {sandbox.spec.profile.memory_mb}"
                " MB ceiling; ask for less work per call, or a larger memory_mb"
            ),
            "details": {
                "peak_rss_kb": int(measured["peak_rss_kb"]),
                "ceiling_mb": sandbox.spec.profile.memory_mb,
            },
        }
    recycle = reason in _RECYCLE_REASONS
    if raw_error is not None and not recycle and await sandbox.pids_refused_since_last_look():
        # The call hit the sandbox's process limit (a fork bomb): its processes may still
        # be dying and holding the CPU quota the runner shares with them. The sandbox
        # serves no other call; a tool error is reported as the limit it ran into.
        recycle = True
        if reason is ExitReason.ERROR:
            reason = ExitReason.KILLED
            raw_error = {
                "code": "SANDBOX_KILLED",
                "message": (
                    f"the call reached the sandbox's limit of {sandbox.spec.profile.pids} "
                    "processes and was stopped; start fewer processes per call"
                ),
                "details": {"pids_limit": sandbox.spec.profile.pids},
            }
    usage = CallUsage(
        wall_ms=measured["wall_ms"],
        cpu_ms=measured["cpu_ms"],
        peak_rss_kb=int(measured["peak_rss_kb"]),
        exit_reason=reason,
        sandbox=sandbox.label,
    )
    quota = sandbox.spec.workspace_quota
    if raw_error is not None and quota is not None and workspace_is_full(sandbox.spec.workspace):
        # The call failed with its workspace full (the host's own look): that is the
        # cause, whatever the tool said. The sandbox and its files stay: the caller may
        # delete what it no longer needs.
        return CallResult(Outcome(usage=usage, error=disk_full_error(quota)), recycle)
    if raw_error is None and OUTPUT in reply:
        try:
            output = ToolResult.from_wire(reply[OUTPUT])
        except ToolResultError as exc:  # tool code wrote its own frame
            usage = usage.model_copy(update={"exit_reason": ExitReason.ERROR})
            error = SerfError.of(
                ErrorCode.TOOL_FAILED, f"the tool's result is not MCP content: {exc}"
            )
            return CallResult(Outcome(usage=usage, error=error), recycle)
        return CallResult(Outcome(usage, result=output.value, output=output), recycle)
    if raw_error is None:
        return CallResult(Outcome(usage=usage, result=reply.get("result")), recycle)
    details = dict(raw_error.get("details") or {})
    if "kill_overshoot_ms" in details:  # no later than the host saw the call answer
        late_ms = max(0.0, wall_ms - limits.timeout_ms)
        details["kill_overshoot_ms"] = _bounded(details["kill_overshoot_ms"], late_ms)
    error = SerfError.of(
        _code(raw_error.get("code"), details.get("mro")),
        str(raw_error.get("message", "the tool failed")),
        param_hints=raw_error.get("param_hints") or None,
        details=details or None,
    )
    return CallResult(Outcome(usage=usage, error=error), recycle)


def check_reply(
    reply: dict[str, Any], call_id: int, limits: CallLimits, channel: RunnerChannel
) -> None:
    """Refuse a reply for another call, or whose result is over the call's output cap.

    Its frame already fit the cap plus the wire's overhead; only a frame longer than the
    cap itself can hold a result over it, so the result is measured only then."""
    if reply.get("id") != call_id or type(reply.get("id")) is not int:
        message = (
            f"the sandbox's runner answered call {call_id} with a reply for "
            f"{str(reply.get('id'))[:40]!r}: a protocol violation; the sandbox was torn down"
        )
        details = {"sandbox_killed": True, "protocol_violation": "reply id"}
        raise ProtocolViolation(SerfError.of(ErrorCode.SANDBOX_KILLED, message, details=details))
    if "result" in reply and channel.last_frame_size > limits.max_output_bytes:
        size = len(json.dumps(reply["result"], separators=(",", ":")).encode())
        if size > limits.max_output_bytes:
            raise output_over_cap(limits, size)


def output_over_cap(limits: CallLimits, size: int) -> ProtocolViolation:
    message = (
        f"the result exceeded the output cap of {limits.max_output_bytes} bytes (the sandbox "
        f"sent {size}); ask for less output (page through it, or write it to a workspace file)"
    )
    details = {"max_output_bytes": limits.max_output_bytes, "sandbox_killed": True}
    error = SerfError.of(ErrorCode.SANDBOX_OUTPUT_LIMIT, message, details=details)
    return ProtocolViolation(error)


def _bounded(claimed: Any, ceiling: float) -> float:
    """A number the runner reported, within [0, ceiling]; anything else counts as 0."""
    try:
        value = float(claimed)
    except (TypeError, ValueError):
        return 0.0
    return min(max(value, 0.0), ceiling) if math.isfinite(value) else 0.0


def clamped_usage(
    claimed: Any, limits: CallLimits, ceiling_mb: int, host_wall_ms: float
) -> dict[str, float]:
    """The runner's usage report, clamped to what the host granted and observed."""
    usage = claimed if isinstance(claimed, dict) else {}
    cpu_limit_ms = (math.ceil(limits.cpu_seconds) + 1) * 1000  # the runner's hard RLIMIT_CPU
    return {
        "wall_ms": _bounded(usage.get("wall_ms", host_wall_ms), host_wall_ms),
        "cpu_ms": _bounded(usage.get("cpu_ms"), cpu_limit_ms),
        "peak_rss_kb": _bounded(usage.get("peak_rss_kb"), ceiling_mb * 1024),
    }


def _code(raw: Any, exception_mro: list[str] | None) -> ErrorCode:
    """The runner's code; a tool's exception's by its type names (`tools.tool_exceptions`)."""
    try:
        code = ErrorCode(raw)
    except ValueError:
        return ErrorCode.INTERNAL
    if code == ErrorCode.TOOL_FAILED and exception_mro:
        return tool_exception_code(exception_mro)
    return code
