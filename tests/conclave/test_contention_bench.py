"""The contention suite, tiny: real gateway process, real Redis, every mode and workload."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.progress import Progress

from conclave.bench.contention.contention_suite import (
    OP_MODE,
    WATCH_AT_ONCE,
    WATCH_BACKOFF,
    RunResult,
    _goals,
    _ops_goals,
    _ops_table,
    _table,
    run_contention,
    run_ops,
)
from conclave.bench.core.suite import BenchContext
from conclave.stack import EmbeddedStack
from gateway.config import Settings

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def stack() -> Iterator[EmbeddedStack]:
    with EmbeddedStack(Settings(port=0, sandbox_backend="process")) as running:
        yield running


async def test_conclave_modes_stay_serializable_while_naive_loses_updates(
    stack: EmbeddedStack, tmp_path: Path
) -> None:
    ctx = BenchContext(stack, quick=True, seed=7, out_dir=tmp_path, progress=Progress())
    results, paced = await run_contention(ctx, (4,), 60, 16)
    runs = {(r.workload, r.mode): r for r in results}
    # WATCH/MULTI with the agents' backoff runs where there are conflicts to back off from.
    assert {w for w, m in runs if m == WATCH_BACKOFF} == {"counter", "cross"}
    assert len(runs) == 14 and all(r.commits >= 60 for r in results)
    for r in [*results, *paced]:
        if r.mode in ("optimistic", "owned"):
            assert r.anomalies == 0, (r.workload, r.mode)
    assert runs[("counter", "naive")].anomalies
    assert runs[("counter", "optimistic")].conflicts > 0  # it was contended, and refused
    assert runs[("dedicated", "optimistic")].conflicts == 0
    assert runs[("counter", "watch")].anomalies is None  # no history to check
    assert runs[("counter", WATCH_BACKOFF)].retries > 0  # the baseline was contended too
    table = _table(results)
    row = table.rows[results.index(runs[("counter", "optimistic")])]
    baseline = runs[("counter", WATCH_BACKOFF)]
    ratio = runs[("counter", "optimistic")].commits_per_s / baseline.commits_per_s
    assert row[-1] == f"{ratio:.0%}"  # the column the goal reads
    assert {(r.workload, r.mode) for r in paced} == {
        ("counter", "optimistic"), ("counter", "owned"), ("cross", "optimistic"),
        ("cross", "owned"),
    }  # fmt: skip


async def test_ops_on_one_hot_key_lose_nothing_and_never_retry(
    stack: EmbeddedStack, tmp_path: Path
) -> None:
    ctx = BenchContext(stack, quick=True, seed=7, out_dir=tmp_path, progress=Progress())
    runs = {(r.workload, r.mode): r for r in await run_ops(ctx, 16, 300)}
    assert set(runs) == {
        ("increment", OP_MODE), ("increment", WATCH_BACKOFF), ("increment", WATCH_AT_ONCE),
        ("append", OP_MODE),
    }  # fmt: skip
    for op in ("increment", "append"):
        run = runs[(op, OP_MODE)]
        assert run.commits >= 300 and (run.anomalies, run.lost, run.retries) == (0, 0, 0), op
    assert runs[("increment", WATCH_BACKOFF)].retries > 0  # the baseline was contended
    ratio = (
        runs[("increment", OP_MODE)].commits_per_s
        / runs[("increment", WATCH_BACKOFF)].commits_per_s
    )
    table = _ops_table(list(runs.values()))
    assert [row[10] for row in table.rows][:2] == [f"{ratio:.1f}x", "1.0x"]
    names = [goal.name for goal in _ops_goals(list(runs.values()))]
    assert names == [
        "increment commits/s vs WATCH/MULTI, same backoff (16)",
        "increment: anomalies, increments lost",
        "appends lost, 16 agents on one list",
    ]


def test_the_counter_goal_compares_each_mode_with_watch_multi_backing_off_alike() -> None:
    def result(mode: str, commits: int, agents: int = 16) -> RunResult:
        return RunResult("counter", mode, agents, commits, 1.0, 1, 2, 1, 2, 0, 0, None)

    results = [
        result("watch", 500), result(WATCH_BACKOFF, 1000), result("optimistic", 800),
        result("owned", 1200), result(WATCH_BACKOFF, 10, agents=4), result("owned", 5, agents=4),
    ]  # fmt: skip
    goals = {g.name: g for g in _goals(results, [])}
    optimistic = goals["commits/s vs WATCH/MULTI, same backoff (counter, optimistic, 16)"]
    owned = goals["commits/s vs WATCH/MULTI, same backoff (counter, owned, 16)"]
    assert (optimistic.measured, optimistic.met) == ("80%", False)
    assert (owned.measured, owned.met) == ("120%", True)
    assert not [name for name in goals if ", 4)" in name]  # the goal reads 16 agents only
