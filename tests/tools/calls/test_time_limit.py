"""A call's time limit, worked out in one place: what each layer kills or waits by."""

from __future__ import annotations

from tools.calls import (
    RUNNER_GRACE_MS,
    TimeLimit,
    fit_timeout,
    gateway_wait_s,
    kill_margin_ms,
    sandbox_deadline_ms,
)


def test_the_timeout_is_the_intent_lowered_by_the_request_and_the_grant_never_raised() -> None:
    assert fit_timeout(2_000, None, None) == 2_000
    assert fit_timeout(2_000, 500, None) == 500
    assert fit_timeout(2_000, 5_000, None) == 2_000  # asking for more gets the intent
    assert fit_timeout(2_000, 500, 300) == 300
    assert fit_timeout(2_000, None, 0) == 1  # a zero grant still lets the runner start


def test_the_sandbox_answers_a_kill_margin_before_the_runs_deadline() -> None:
    assert kill_margin_ms(30, 12.7) == 42
    assert sandbox_deadline_ms(10_000, 42) == 9_958
    assert sandbox_deadline_ms(10_000, None) == 10_000
    assert sandbox_deadline_ms(None, 42) is None
    assert gateway_wait_s(10_000, 30, now_ms=9_000) == 0.97


def test_a_call_starting_late_gets_only_what_is_left_before_the_sandboxs_deadline() -> None:
    limit = TimeLimit(timeout_ms=500, stop_by_ms=10_000)
    assert limit.wall_ms(now_ms=9_000) == 500  # time enough: the whole timeout
    assert limit.wall_ms(now_ms=9_800) == 200  # a cold start ate the rest
    assert limit.wall_ms(now_ms=10_500) == 1  # past it: the runner kills at once
    assert limit.left_s(now_ms=9_800) == 0.2
    assert limit.left_s(now_ms=10_500) == 0.0
    unbounded = TimeLimit(timeout_ms=500)
    assert unbounded.wall_ms(now_ms=10**12) == 500 and unbounded.left_s() is None
    assert TimeLimit.runner_wait_s(200) == (200 + RUNNER_GRACE_MS) / 1000
