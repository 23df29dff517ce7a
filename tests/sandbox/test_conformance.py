"""One behaviour suite, run against every backend: calls, context, errors, limits, the pool."""

from __future__ import annotations

import signal

import anyio
import pytest

from protocol.serf import ErrorCode
from protocol.tools import ExitReason
from sandbox.pool.sandbox_uids import FIRST_SANDBOX_UID
from tests.sandbox.conftest import (
    ALL_BACKENDS,
    PoolFactory,
    invocation,
    processes_mentioning,
    signal_the_runner,
)

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("backend", ALL_BACKENDS)]


async def test_a_call_returns_its_result_and_usage(backend: str, make_pool: PoolFactory) -> None:
    pool = await make_pool(backend)
    outcome = await pool.execute(invocation("echo", {"message": "hi"}, module="tools.builtin"))
    assert outcome.ok and outcome.result == "hi"
    assert outcome.usage.exit_reason == ExitReason.OK
    assert outcome.usage.sandbox and outcome.usage.sandbox.startswith(f"{backend}:")
    assert 0 < outcome.usage.wall_ms < 5_000 and outcome.usage.peak_rss_kb > 0
    again = await pool.execute(invocation("echo", {"message": "again"}, module="tools.builtin"))
    assert again.result == "again" and again.usage.sandbox == outcome.usage.sandbox
    assert pool.started == 1  # the second call was warm


async def test_the_gateway_context_reaches_the_tool(backend: str, make_pool: PoolFactory) -> None:
    pool = await make_pool(backend)
    outcome = await pool.execute(invocation("whoami", agent="bob", tenant="globex"))
    assert outcome.result["agent"] == "bob" and outcome.result["tenant"] == "globex"
    assert outcome.result["trace_id"] == "0af7651916cd43dd8448eb211c80319c"
    if backend != "process":
        assert outcome.result["cwd"] == "/workspace"
        assert outcome.result["uid"] in range(FIRST_SANDBOX_UID, FIRST_SANDBOX_UID + 65_536)


async def test_a_tool_asking_who_it_runs_as_is_told(backend: str, make_pool: PoolFactory) -> None:
    """Its uid is its sandbox's own and in no passwd file: `getpass.getuser()` raised KeyError
    before the sandbox told it its name."""
    pool = await make_pool(backend)
    code = "import getpass, os\n(getpass.getuser(), os.path.expanduser('~') == os.getcwd())"
    outcome = await pool.execute(invocation("run_python", {"code": code}, module="tools.builtin"))
    assert outcome.error is None, outcome.error
    assert outcome.result["return_value"] == ["sandbox", True]  # and its home is its workspace


async def test_tool_exceptions_are_tool_failed_without_traceback(
    backend: str, make_pool: PoolFactory
) -> None:
    pool = await make_pool(backend)
    outcome = await pool.execute(invocation("fail", {"message": "disk on fire"}))
    assert outcome.error is not None and outcome.error.code == ErrorCode.TOOL_FAILED
    assert outcome.error.details["type"] == "RuntimeError"
    assert "disk on fire" in outcome.error.message and "Traceback" not in outcome.error.message
    bad = await pool.execute(invocation("echo", {"messag": 1}, module="tools.builtin"))
    assert bad.error is not None and bad.error.code == ErrorCode.INVALID_ARGUMENTS
    assert "message" in bad.error.param_hints
    assert pool.started == 1  # tool errors do not cost the sandbox


async def test_a_call_past_its_wall_limit_dies_and_the_sandbox_stays_warm(
    backend: str, make_pool: PoolFactory
) -> None:
    pool = await make_pool(backend)
    outcome = await pool.execute(invocation("spawn_then_hang", {"seconds": 30}, timeout_ms=300))
    assert outcome.error is not None and outcome.error.code == ErrorCode.TOOL_TIMEOUT
    assert outcome.usage.exit_reason == ExitReason.TIMEOUT
    assert 300 <= outcome.usage.wall_ms < 450
    # The retry a kill invites finds the same sandbox warm, with nothing of the killed call
    # left running in it (not even the child it detached).
    noted = await pool.execute(invocation("read_path", {"path": "hang.pid"}))
    assert noted.ok and noted.usage.sandbox == outcome.usage.sandbox
    check = await pool.execute(invocation("is_alive", {"pid": int(noted.result)}))
    assert check.result is False
    assert pool.started == 1 and pool.recycled == 0


async def test_cpu_spin_past_its_cpu_limit(backend: str, make_pool: PoolFactory) -> None:
    pool = await make_pool(backend)
    outcome = await pool.execute(invocation("spin", cpu_seconds=1, timeout_ms=20_000))
    assert outcome.error is not None and outcome.error.code == ErrorCode.SANDBOX_CPU_LIMIT
    assert outcome.usage.cpu_ms >= 500  # the kernel samples CPU time: roughly the 1 s limit


async def test_memory_past_the_call_limit_is_oom_with_peak(
    backend: str, make_pool: PoolFactory
) -> None:
    pool = await make_pool(backend)
    outcome = await pool.execute(invocation("allocate", {"megabytes": 2048}, memory_mb=64))
    assert outcome.error is not None and outcome.error.code == ErrorCode.SANDBOX_OOM
    assert outcome.usage.exit_reason == ExitReason.OOM
    assert outcome.error.details["peak_rss_kb"] > 0 and "memory_mb" in outcome.error.message
    small = await pool.execute(invocation("allocate", {"megabytes": 16}, memory_mb=64))
    assert small.result == 16 * 1024 * 1024


async def test_output_over_the_cap(backend: str, make_pool: PoolFactory) -> None:
    pool = await make_pool(backend)
    outcome = await pool.execute(invocation("big_output", {"size": 50_000}, max_output_bytes=4096))
    assert outcome.error is not None and outcome.error.code == ErrorCode.SANDBOX_OUTPUT_LIMIT
    fits = await pool.execute(invocation("big_output", {"size": 1000}, max_output_bytes=4096))
    assert fits.result == "x" * 1000


async def test_a_detached_child_does_not_outlive_its_call(
    backend: str, make_pool: PoolFactory
) -> None:
    pool = await make_pool(backend)
    spawned = await pool.execute(invocation("spawn_detached"))
    assert isinstance(spawned.result, int)
    check = await pool.execute(invocation("is_alive", {"pid": spawned.result}))
    assert check.usage.sandbox == spawned.usage.sandbox and check.result is False


async def test_a_stopped_runner_is_torn_down_and_replaced(
    backend: str, make_pool: PoolFactory
) -> None:
    pool = await make_pool(backend)
    stopped = await signal_the_runner(pool, signal.SIGSTOP, timeout_ms=300)
    assert stopped.error is not None and stopped.error.code == ErrorCode.TOOL_TIMEOUT
    assert stopped.error.details["sandbox_killed"] is True
    killed = await signal_the_runner(pool, signal.SIGKILL)
    assert killed.error is not None and killed.error.code == ErrorCode.SANDBOX_KILLED
    after = await pool.execute(invocation("echo", {"message": "ok"}, module="tools.builtin"))
    assert after.result == "ok" and pool.started == 3


async def test_identities_never_share_a_sandbox(backend: str, make_pool: PoolFactory) -> None:
    pool = await make_pool(backend)
    alice = await pool.execute(invocation("whoami", agent="alice"))
    bob = await pool.execute(invocation("whoami", agent="bob"))
    other_tenant = await pool.execute(invocation("whoami", agent="alice", tenant="globex"))
    labels = {alice.usage.sandbox, bob.usage.sandbox, other_tenant.usage.sandbox}
    assert len(labels) == 3


async def test_pool_cap_recycling_reaping_and_shutdown(
    backend: str, make_pool: PoolFactory
) -> None:
    pool = await make_pool(backend, pool_max=1, recycle_after=2, idle_s=60)
    results: dict[str, object] = {}

    async def slow() -> None:
        results["slow"] = await pool.execute(invocation("sleep", {"seconds": 1.0}))

    async with anyio.create_task_group() as group:
        group.start_soon(slow)
        with anyio.fail_after(30):
            while pool._busy == set():  # noqa: ASYNC110 (polling the pool's own state)
                await anyio.sleep(0.005)
        refused = await pool.execute(invocation("whoami", agent="bob"))
    assert refused.error is not None and refused.error.code == ErrorCode.SANDBOX_UNAVAILABLE
    assert refused.error.retryable and refused.error.retry_after_ms
    first = await pool.execute(invocation("whoami"))  # second call of that sandbox: recycled
    assert first.usage.sandbox == results["slow"].usage.sandbox  # type: ignore[attr-defined]
    fresh = await pool.execute(invocation("whoami"))
    assert fresh.usage.sandbox != first.usage.sandbox
    pool.config = pool.config.model_copy(update={"idle_s": 0.01})
    reaped = 0
    with anyio.fail_after(5):
        while pool.size:  # the pool's own reaper (in its task group) may come first
            reaped += await pool.reap_idle()
    assert reaped <= 1 and pool.size == 0
    await pool.execute(invocation("whoami"))
    await pool.aclose()
    assert processes_mentioning(str(pool.workspace_root)) == []
    assert not any(pool.workspace_root.iterdir())
