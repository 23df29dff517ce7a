from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from agents import GatewayCallError, RecoveryFailed, RecoveryHooks, RecoveryPolicy, RecoveryStep
from protocol.serf import ErrorCode, RecoveryAction, SerfError

pytestmark = pytest.mark.anyio


class Clock:
    """Virtual time: the policy's waits advance it instead of sleeping."""

    def __init__(self) -> None:
        self.now_s = 1_000.0
        self.waits_ms: list[float] = []

    def time(self) -> float:
        return self.now_s

    async def sleep(self, seconds: float) -> None:
        self.waits_ms.append(seconds * 1000)
        self.now_s += seconds


def _policy(clock: Clock, **kwargs: object) -> RecoveryPolicy:
    return RecoveryPolicy(clock=clock.time, sleep=clock.sleep, **kwargs)  # type: ignore[arg-type]


def _failing(errors: list[SerfError], result: str = "done") -> Callable[[], Awaitable[str]]:
    calls = iter(errors)

    async def op() -> str:
        error = next(calls, None)
        if error is not None:
            raise GatewayCallError(error)
        return result

    return op


async def test_backoff_waits_at_least_retry_after_and_then_succeeds() -> None:
    clock = Clock()
    errors = [SerfError.of(ErrorCode.RATE_LIMITED, "slow down", retry_after_ms=700)] * 2
    trace: list[RecoveryStep] = []
    assert await _policy(clock).run(_failing(errors), trace=trace) == "done"
    assert clock.waits_ms == [700.0, 700.0]
    assert [s.action for s in trace] == ["retry_backoff", "retry_backoff"]


async def test_backoff_grows_with_jitter_and_is_deterministic_per_seed() -> None:
    error = SerfError.of(ErrorCode.RATE_LIMITED, "x", retry_after_ms=0)
    runs = []
    for seed in (1, 1, 2):
        clock = Clock()
        await _policy(clock, seed=seed, base_delay_ms=100).run(_failing([error] * 4))
        runs.append(clock.waits_ms)
    assert runs[0] == runs[1] and runs[0] != runs[2]
    for retry, waited in enumerate(runs[0]):
        assert 50 * 2**retry <= waited <= 100 * 2**retry


async def test_abort_stops_at_once_whatever_the_message_says() -> None:
    clock = Clock()
    error = SerfError.of(ErrorCode.AUTH_REVOKED, "please retry immediately, it will work")
    with pytest.raises(RecoveryFailed) as failed:
        await _policy(clock).run(_failing([error]))
    assert failed.value.attempts == 1 and failed.value.serf.code == ErrorCode.AUTH_REVOKED
    assert clock.waits_ms == []


async def test_attempts_are_bounded() -> None:
    error = SerfError.of(ErrorCode.UPSTREAM_UNAVAILABLE, "x", action=RecoveryAction.RETRY_SAME)
    calls = 0

    async def op() -> str:
        nonlocal calls
        calls += 1
        raise GatewayCallError(error)

    with pytest.raises(RecoveryFailed) as failed:
        await _policy(Clock(), max_attempts=3).run(op)
    assert calls == 3 and failed.value.reason == "attempts exhausted"


async def test_a_wait_past_the_deadline_is_not_taken() -> None:
    clock = Clock()
    error = SerfError.of(ErrorCode.RATE_LIMITED, "x", retry_after_ms=2_000)
    with pytest.raises(RecoveryFailed) as failed:
        await _policy(clock).run(_failing([error]), deadline_ms=clock.now_s * 1000 + 1_500)
    assert failed.value.reason == "no time left to retry" and clock.waits_ms == []


async def test_fix_args_hands_the_param_hints_to_the_hook() -> None:
    seen: list[dict[str, str]] = []

    async def fix(error: SerfError) -> Callable[[], Awaitable[str]]:
        seen.append(error.param_hints)
        return _failing([], result="fixed")

    error = SerfError.of(ErrorCode.INVALID_ARGUMENTS, "x", param_hints={"n": "must be >= 1"})
    result = await _policy(Clock()).run(_failing([error]), RecoveryHooks(fix_args=fix))
    assert result == "fixed" and seen == [{"n": "must be >= 1"}]


async def test_a_missing_hook_stops_with_the_reason() -> None:
    error = SerfError.of(ErrorCode.STATE_CONFLICT, "x")
    with pytest.raises(RecoveryFailed) as failed:
        await _policy(Clock()).run(_failing([error]))
    assert "reread" in failed.value.reason and failed.value.attempts == 1


async def test_a_new_op_hook_that_finds_nothing_stops() -> None:
    async def nothing(error: SerfError) -> None:
        return None

    error = SerfError.of(ErrorCode.TOOL_NOT_ALLOWED, "x")
    with pytest.raises(RecoveryFailed) as failed:
        await _policy(Clock()).run(_failing([error]), RecoveryHooks(switch_tool=nothing))
    assert failed.value.reason == "the switch_tool hook found no way"


@pytest.mark.parametrize("action", list(RecoveryAction))
async def test_every_action_is_followed(action: RecoveryAction) -> None:
    called: list[str] = []

    def hook(name: str, returns_op: bool) -> Callable[[SerfError], Awaitable[object]]:
        async def run(error: SerfError) -> object:
            called.append(name)
            return _failing([], result=f"via {name}") if returns_op else None

        return run

    hooks: RecoveryHooks[str] = RecoveryHooks(
        reread=hook("reread", False),  # type: ignore[arg-type]
        reacquire=hook("reacquire", False),  # type: ignore[arg-type]
        reauth=hook("reauth", False),  # type: ignore[arg-type]
        fix_args=hook("fix_args", True),  # type: ignore[arg-type]
        switch_tool=hook("switch_tool", True),  # type: ignore[arg-type]
        replan=hook("replan", True),  # type: ignore[arg-type]
    )
    error = SerfError.of(ErrorCode.TOOL_FAILED, "x", action=action, retry_after_ms=0)
    clock = Clock()
    if action is RecoveryAction.ABORT:
        with pytest.raises(RecoveryFailed):
            await _policy(clock).run(_failing([error]), hooks)
        assert called == []
        return
    result = await _policy(clock).run(_failing([error]), hooks)
    expected = {
        "reread_and_retry": ("reread", "done"),
        "reacquire": ("reacquire", "done"),
        "reauth": ("reauth", "done"),
        "fix_args": ("fix_args", "via fix_args"),
        "switch_tool": ("switch_tool", "via switch_tool"),
        "replan": ("replan", "via replan"),
    }
    hook_name, value = expected.get(action, (None, "done"))
    assert called == ([hook_name] if hook_name else [])
    assert result == value
    assert (len(clock.waits_ms) == 1) == (action is RecoveryAction.RETRY_BACKOFF)
