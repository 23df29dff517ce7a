"""SERF recovery in the SDK: what to do after a failed call, decided by `action` alone.

`RecoveryPolicy.run(op, hooks)` calls `op` and, on a `GatewayCallError`, follows the
envelope's `action`:

| action             | what the policy does                                              |
|--------------------|-------------------------------------------------------------------|
| `retry_same`       | call again at once (after `retry_after_ms`, if the gateway set it)|
| `retry_backoff`    | wait max(`retry_after_ms`, jittered exponential backoff), again   |
| `reread_and_retry` | `hooks.reread(error)`, then again                                 |
| `reacquire`        | `hooks.reacquire(error)` (take the lease back), then again        |
| `reauth`           | `hooks.reauth(error)` (refresh the token), then again             |
| `fix_args`         | `hooks.fix_args(error)` gets the `param_hints` and returns the op  |
|                    | with corrected arguments (e.g. after asking the model)            |
| `switch_tool`      | `hooks.switch_tool(error)` returns an op on another tool          |
| `replan`           | `hooks.replan(error)` returns the op of a new plan                |
| `abort`            | stop                                                              |

Hooks for reread/reacquire/reauth return None to call the same op again, or a new op. The
others must return the op to call; None (or no hook) means there is no way forward. The
policy stops with `RecoveryFailed` when the action says so, when a needed hook is missing,
after `max_attempts` calls, or when a wait would not end before the run's deadline. It never
reads `message`. Jitter comes from a seeded generator: the same seed and the same failures
give the same waits.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from agents.agent_errors import GatewayCallError, RecoveryFailed
from protocol import RecoveryAction, SerfError

T = TypeVar("T")
Operation = Callable[[], Awaitable[T]]
Hook = Callable[[SerfError], Awaitable[Operation[T] | None]]

_A = RecoveryAction
_SIDE_EFFECT_HOOKS = {_A.REREAD_AND_RETRY: "reread", _A.REACQUIRE: "reacquire", _A.REAUTH: "reauth"}
_NEW_OP_HOOKS = {_A.FIX_ARGS: "fix_args", _A.SWITCH_TOOL: "switch_tool", _A.REPLAN: "replan"}


@dataclass(frozen=True)
class RecoveryHooks(Generic[T]):
    """What the caller can do that the policy cannot: re-read, re-lease, re-login, re-think."""

    reread: Hook[T] | None = None
    reacquire: Hook[T] | None = None
    reauth: Hook[T] | None = None
    fix_args: Hook[T] | None = None
    switch_tool: Hook[T] | None = None
    replan: Hook[T] | None = None


@dataclass(frozen=True)
class RecoveryStep:
    """One failure and what the policy did about it (for logs, tests and benchmarks)."""

    attempt: int
    code: str
    action: RecoveryAction
    waited_ms: float


@dataclass
class RecoveryPolicy:
    max_attempts: int = 5
    base_delay_ms: float = 50.0
    max_delay_ms: float = 5_000.0
    seed: int = 0
    clock: Callable[[], float] = time.time  # seconds since the epoch, like the deadline
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    _random: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._random = random.Random(self.seed)

    def backoff_ms(self, retry: int, retry_after_ms: int | None) -> float:
        """Equal-jitter exponential backoff for the n-th retry (0-based), never below the
        gateway's `retry_after_ms`."""
        ceiling = min(self.max_delay_ms, self.base_delay_ms * 2.0**retry)
        jittered = ceiling / 2 + self._random.uniform(0, ceiling / 2)
        return max(float(retry_after_ms or 0), jittered)

    async def run(
        self,
        op: Operation[T],
        hooks: RecoveryHooks[T] | None = None,
        *,
        deadline_ms: float | None = None,
        trace: list[RecoveryStep] | None = None,
    ) -> T:
        hooks = hooks or RecoveryHooks()
        backoffs = 0
        for attempt in range(1, self.max_attempts + 1):
            try:
                return await op()
            except GatewayCallError as exc:
                error = exc.serf
            wait_ms = 0.0
            if error.action is _A.RETRY_BACKOFF:
                wait_ms = self.backoff_ms(backoffs, error.retry_after_ms)
                backoffs += 1
            elif error.retry_after_ms:
                wait_ms = float(error.retry_after_ms)
            if trace is not None:
                trace.append(RecoveryStep(attempt, error.code, error.action, wait_ms))
            if error.action is _A.ABORT:
                raise RecoveryFailed(error, attempts=attempt, reason="the gateway said abort")
            if attempt == self.max_attempts:
                break
            if deadline_ms is not None and self.clock() * 1000 + wait_ms >= deadline_ms:
                raise RecoveryFailed(error, attempts=attempt, reason="no time left to retry")
            if wait_ms > 0:
                await self.sleep(wait_ms / 1000)
            op = await self._next_op(op, error, hooks, attempt)
        raise RecoveryFailed(error, attempts=self.max_attempts, reason="attempts exhausted")

    async def _next_op(
        self, op: Operation[T], error: SerfError, hooks: RecoveryHooks[T], attempt: int
    ) -> Operation[T]:
        name = _SIDE_EFFECT_HOOKS.get(error.action) or _NEW_OP_HOOKS.get(error.action)
        if name is None:  # retry_same, retry_backoff
            return op
        hook: Hook[T] | None = getattr(hooks, name)
        if hook is None:
            raise RecoveryFailed(
                error, attempts=attempt, reason=f"no {name} hook for {error.action}"
            )
        replacement = await hook(error)
        if replacement is not None:
            return replacement
        if error.action in _NEW_OP_HOOKS:
            raise RecoveryFailed(error, attempts=attempt, reason=f"the {name} hook found no way")
        return op
