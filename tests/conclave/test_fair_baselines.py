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

from conclave.bench.core.suite import BenchContext, SuiteResult
from conclave.bench.recovery import budgets_suite, errors_suite
from conclave.stack import EmbeddedStack
from gateway.config import Settings
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
    titles = [t.title.split(":")[0] for t in result.tables]
    assert titles == ["heavy-tail", "heavy-tail", "hang-prone", "hang-prone"]
    for table in result.tables[::2]:
        rate = {(row[0], row[1]): row[2] for row in table.rows}
        expected = {*budgets_suite.POLICIES, budgets_suite.ORACLE}
        assert {policy for _, policy in rate} == expected and "remaining-time" in expected
        for deadline in deadlines:
            optimum = rate[(deadline, budgets_suite.ORACLE)]
            for policy in budgets_suite.POLICIES:
                assert optimum >= rate[(deadline, policy)], (table.title, deadline, policy)
    hang_prone = {(row[0], row[1]): row for row in _rows(result, 2)}
    assert sum(hang_prone[(d, "fixed-split")][5] for d in deadlines) > 0  # hung calls killed
    assert all("n=4 chains per deadline" in goal.name for goal in result.goals)
    # Per workload: ATBA+hedge against the best fixed policy (hedged or not) where it first
    # reaches 50% and at every deadline; then the optimum, violations and the extra load.
    assert len(result.goals) == 7
    # The optimum again at the run's median per-call overhead: never above the optimum.
    for workload in ("heavy-tail", "hang-prone"):
        lines = result.series[f"completion {workload}"]
        typical = dict(map(tuple, lines[budgets_suite.TYPICAL_ORACLE]))
        optimum = dict(map(tuple, lines[budgets_suite.ORACLE]))
        assert all(typical[d] <= optimum[d] for d in deadlines), workload
        assert any(note.startswith(f"{workload}: at the median overhead") for note in result.notes)


def test_each_fixed_policy_has_a_hedged_row_and_each_row_its_interval_and_load(
    stack: EmbeddedStack, tmp_path: Path
) -> None:
    ctx = _quick(stack, tmp_path)
    ctx.chains = 3
    result = budgets_suite.run(ctx)
    chains, load = result.tables[0], result.tables[1]
    assert "3 chains each" in chains.title
    rows = {(row[0], row[1]): row for row in chains.rows}
    for deadline in budgets_suite.DEADLINES_MS:
        for policy in ("fixed-60s", "fixed-split", "remaining-time", "atba"):
            assert (deadline, policy) in rows and (deadline, f"{policy}+hedge") in rows
        for policy in budgets_suite.POLICIES:
            row = rows[(deadline, policy)]
            low, high = map(float, row[7].split("-"))  # the 95% Wilson interval
            assert low <= row[2] <= high, row
    assert load.columns[:4] == ["policy", "calls", "hedges", "extra attempts %"]
    by_policy = {row[0]: row for row in load.rows}
    assert set(by_policy) == set(budgets_suite.POLICIES)
    assert all(by_policy[p][2] == 0 for p in ("fixed-split", "atba"))  # never hedged
    assert sum(row[5] for row in load.rows) > 0  # the calls' sandbox CPU, from the audit
    assert any("extra attempts" in goal.name and "<= 10%" in goal.target for goal in result.goals)


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
