"""When a tool call is killed: the one place a call's effective time limit is worked out.

Every layer that stops a call reads its limit from here instead of cutting on its own:

1. the tool's timeout: its declared intent, lowered by the caller's request and by the
   budget stage's grant (`fit_timeout`);
2. the sandbox's deadline: the run's deadline less the kill margin (the fixed margin for the
   reply, plus how late kills have answered here: `kill_margin_ms`), so a call cut there
   still answers by the run's own deadline (`sandbox_deadline_ms`); the tool sees this
   deadline in its context;
3. the wall limit the runner enforces: the timeout, cut to what is left before the sandbox's
   deadline at the moment the call starts, which may be after a cold start
   (`TimeLimit.wall_ms`); the pool stops waiting for a sandbox at that deadline too
   (`TimeLimit.left_s`);
4. how long the host waits past that for the runner's own kill to report before it tears
   the sandbox down (`RUNNER_GRACE_MS`, `TimeLimit.runner_wait_s`);
5. the gateway's backstop: it stops waiting at the run's deadline less the reply margin,
   whatever the sandbox does (`gateway_wait_s`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from tools.calls.invocation import Invocation

# How long past a call's wall limit the host waits for the runner's own kill to report.
RUNNER_GRACE_MS = 250


def _now_ms() -> float:
    return time.time() * 1000


def fit_timeout(declared_ms: int, asked_ms: int | None, granted_ms: int | None) -> int:
    """The most a call may run: the tool's declared timeout, lowered by the caller's request
    and by the time grant (never raised by either)."""
    timeout = min(declared_ms, asked_ms or declared_ms)
    if granted_ms is not None:
        timeout = min(timeout, granted_ms)
    return max(1, timeout)


def kill_margin_ms(reply_margin_ms: int, kill_lateness_p95_ms: float) -> int:
    """How much earlier than the run's deadline a call's sandbox must answer: a fixed margin
    for the reply, plus how late killed calls have answered here (their p95)."""
    return reply_margin_ms + int(kill_lateness_p95_ms)


def sandbox_deadline_ms(deadline_ms: int | None, kill_margin_ms: int | None) -> int | None:
    """The sandbox's deadline: the run's, moved earlier by what a kill and the reply take."""
    if deadline_ms is None or kill_margin_ms is None:
        return deadline_ms
    return deadline_ms - kill_margin_ms


def gateway_wait_s(deadline_ms: int, reply_margin_ms: int, now_ms: float | None = None) -> float:
    """How long the gateway waits for the sandbox before it answers TOOL_TIMEOUT itself."""
    return (deadline_ms - reply_margin_ms - (now_ms if now_ms is not None else _now_ms())) / 1000


@dataclass(frozen=True)
class TimeLimit:
    """One call's limit as the sandbox side reads it: its timeout and the deadline by which
    the sandbox must have answered (`None`: the run has no deadline)."""

    timeout_ms: int
    stop_by_ms: int | None = None

    @classmethod
    def of(cls, invocation: Invocation) -> TimeLimit:
        return cls(invocation.limits.timeout_ms, invocation.context.deadline_ms)

    def left_s(self, now_ms: float | None = None) -> float | None:
        """Seconds left before the sandbox's deadline (never negative); None without one."""
        if self.stop_by_ms is None:
            return None
        return max(0.0, (self.stop_by_ms - (now_ms if now_ms is not None else _now_ms())) / 1000)

    def wall_ms(self, now_ms: float | None = None) -> int:
        """The wall limit for a call starting now: never past the sandbox's deadline."""
        if self.stop_by_ms is None:
            return self.timeout_ms
        left = int(self.stop_by_ms - (now_ms if now_ms is not None else _now_ms()))
        return self.timeout_ms if left >= self.timeout_ms else max(1, left)

    @staticmethod
    def runner_wait_s(wall_ms: int) -> float:
        """How long the host waits for the runner's answer to a call with this wall limit."""
        return (wall_ms + RUNNER_GRACE_MS) / 1000
