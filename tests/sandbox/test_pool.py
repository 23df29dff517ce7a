"""Pool behaviour that does not depend on the backend (run on the process backend)."""

from __future__ import annotations

import os
import signal

import anyio
import pytest

from sandbox.executor import CallLimits
from sandbox.pool import MEMORY_TIERS_MB, RUNNER_OVERHEAD_MB, profile_for
from tests.sandbox.conftest import PoolFactory, invocation

pytestmark = pytest.mark.anyio


async def test_a_runner_that_died_while_idle_is_replaced_transparently(
    make_pool: PoolFactory,
) -> None:
    pool = make_pool("process")
    first = await pool.execute(invocation("whoami"))
    (idle,) = [s for sandboxes in pool._idle.values() for s in sandboxes]
    os.kill(idle.hello["pid"], signal.SIGKILL)
    with anyio.fail_after(10):
        while await idle.launched.exit_reason() is None:  # noqa: ASYNC110 (a process exit)
            await anyio.sleep(0.005)
    second = await pool.execute(invocation("whoami"))
    assert second.ok and second.usage.sandbox != first.usage.sandbox
    assert pool.started == 2


async def test_prewarm_makes_the_first_call_warm(make_pool: PoolFactory) -> None:
    pool = make_pool("process")
    limits = CallLimits(memory_mb=256, cpu_seconds=10, timeout_ms=10_000, max_output_bytes=1024)
    await pool.prewarm("acme", "alice", limits)
    assert pool.started == 1
    outcome = await pool.execute(invocation("whoami"))
    assert outcome.ok and pool.started == 1


def test_profiles_round_memory_up_to_a_tier_plus_the_runner() -> None:
    small = CallLimits(memory_mb=64, cpu_seconds=1, timeout_ms=1000, max_output_bytes=1)
    large = CallLimits(memory_mb=300, cpu_seconds=1, timeout_ms=1000, max_output_bytes=1)
    assert profile_for(small).memory_mb == MEMORY_TIERS_MB[0] + RUNNER_OVERHEAD_MB
    assert profile_for(large).memory_mb == MEMORY_TIERS_MB[1] + RUNNER_OVERHEAD_MB
    assert profile_for(small) == profile_for(small) != profile_for(large)
