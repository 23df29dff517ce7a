"""The errors and budgets suites, quick, against their fair baselines (issue 15).

Real gateway processes over real HTTP, real Redis, the process sandbox: the rows a user reads
exist, the status-aware client stops on a 4xx, and no policy beats the offline optimum.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.progress import Progress

from conclave.bench import budgets_suite, errors_suite
from conclave.bench.suite import BenchContext, SuiteResult
from conclave.stack import EmbeddedStack
from gateway.settings import Settings
from tools.harness.faults import chain_latency_ms


@pytest.fixture(scope="module")
def stack() -> Iterator[EmbeddedStack]:
    with EmbeddedStack(Settings(port=0, sandbox_backend="process")) as running:
        yield running


def _quick(stack: EmbeddedStack, tmp_path: Path) -> BenchContext:
    return BenchContext(stack, quick=True, seed=7, out_dir=tmp_path, progress=Progress())


def _rows(result: SuiteResult, table: int = 0) -> list[list[Any]]:
    return result.tables[table].rows


def test_errors_has_a_status_aware_row_that_stops_on_4xx(
    stack: EmbeddedStack, tmp_path: Path
) -> None:
    result = errors_suite.run(_quick(stack, tmp_path))
    rows = {(row[0], row[1]): row for row in _rows(result)}
    tasks = len(errors_suite.make_tasks(7, 6)) // len(errors_suite.MODES)
    for mode in (*errors_suite.MODES, "all"):
        assert {(mode, c) for c in ("blind", "status-aware", "serf")} <= set(rows)
    # 403, 409 and 422 are final to a client that reads only the status: one call per task.
    for mode in ("bad_args", "conflict", "not_allowed", "permission"):
        assert rows[(mode, "status-aware")][3] == tasks, mode
        assert rows[(mode, "status-aware")][2] == 0, mode
    # A 503 that clears and a 429 whose window passes are retried until they succeed.
    assert rows[("transient", "status-aware")][2] == 100
    assert rows[("rate_limited", "status-aware")][2] == 100
    # The fatal bug (502) is retried to the cap, as the blind client does.
    assert rows[("fatal", "status-aware")][3] == tasks * errors_suite.MAX_CALLS
    goals = [goal.name for goal in result.goals]
    assert any("status-aware" in name and "n=42 tasks" in name for name in goals), goals


def test_budgets_runs_both_workloads_under_the_offline_optimum(
    stack: EmbeddedStack, tmp_path: Path
) -> None:
    deadlines = (400, 1_120)
    result = budgets_suite.run_budgets(_quick(stack, tmp_path), 4, deadlines)
    assert [t.title.split(":")[0] for t in result.tables] == ["heavy-tail", "hang-prone"]
    for table in result.tables:
        rate = {(row[0], row[1]): row[2] for row in table.rows}
        expected = {*budgets_suite.POLICIES, budgets_suite.ORACLE}
        assert {policy for _, policy in rate} == expected and "remaining-time" in expected
        for deadline in deadlines:
            optimum = rate[(deadline, budgets_suite.ORACLE)]
            for policy in budgets_suite.POLICIES:
                assert optimum >= rate[(deadline, policy)], (table.title, deadline, policy)
    hang_prone = {(row[0], row[1]): row for row in _rows(result, 1)}
    assert sum(hang_prone[(d, "fixed-split")][5] for d in deadlines) > 0  # hung calls killed
    assert all("n=4 chains per deadline" in goal.name for goal in result.goals)
    assert len(result.goals) == 4
    # The optimum again at the run's median per-call overhead: never above the optimum.
    for workload in ("heavy-tail", "hang-prone"):
        lines = result.series[f"completion {workload}"]
        typical = dict(map(tuple, lines[budgets_suite.TYPICAL_ORACLE]))
        optimum = dict(map(tuple, lines[budgets_suite.ORACLE]))
        assert all(typical[d] <= optimum[d] for d in deadlines), workload
        assert any(note.startswith(f"{workload}: at the median overhead") for note in result.notes)


def test_the_optimum_kills_a_hung_attempt_and_takes_the_next() -> None:
    hung = next(
        chain
        for chain in (budgets_suite.Chain(("chain_hang_parse",), base) for base in range(1000))
        if chain_latency_ms("chain_hang_parse", chain.seed(0, 0)) >= 60_000
    )
    # Attempt 0 would never answer: the optimum kills it (20 ms) and pays the best of the rest.
    cost = min(
        20.0 * k + 10.0 + chain_latency_ms("chain_hang_parse", hung.seed(0, k))
        for k in range(1, 50)
    )
    assert budgets_suite.oracle_completes(hung, math.ceil(cost), call_ms=10.0, kill_ms=20.0)
    assert not budgets_suite.oracle_completes(hung, math.floor(cost) - 1, call_ms=10, kill_ms=20)
