"""The tasks suite in a reduced form, on the real gateway: AgentDojo, HumanEval, the ledger."""

from __future__ import annotations

from typing import Any

import pytest

from agents import GatewayClient, ScriptedModel
from conclave.bench.tasks.humaneval_tasks import run_humaneval
from conclave.bench.tasks.ledger_task import run_ledger
from conclave.bench.tasks.tasks_suite import agentdojo_table

pytestmark = [pytest.mark.anyio, pytest.mark.system]  # starts stacks in its tests' bodies
# `conclave.bench.tasks.agentdojo_tasks` is imported in the tests that use it, not here: it imports
# agentdojo (about 5 s), which every pytest process would pay at collection, run or not.


async def test_the_agentdojo_oracle_reaches_ground_truth_utility(admin: GatewayClient) -> None:
    from conclave.bench.tasks.agentdojo_tasks import run_agentdojo

    scores = await run_agentdojo(admin, suites=["banking", "slack"], tasks_per_suite=2)
    assert [(s.suite, s.tasks, s.utility, s.reference) for s in scores] == [
        ("banking", 2, 2, 2),
        ("slack", 2, 2, 2),
    ]
    assert all(s.calls > 1 and len(s.overhead_ms) == s.calls - 1 for s in scores)
    assert all(s.cold_start_ms is not None for s in scores)


async def test_an_agent_that_does_nothing_scores_no_utility(admin: GatewayClient) -> None:
    from conclave.bench.tasks.agentdojo_tasks import run_agentdojo

    def idle(suite: str, task: Any, pre: Any) -> ScriptedModel:
        return ScriptedModel(["I cannot help with that."])

    [score] = await run_agentdojo(admin, suites=["banking"], tasks_per_suite=2, model_for=idle)
    assert (score.utility, score.reference, score.calls) == (0, 2, 0)


async def test_humaneval_canonical_solutions_pass_in_the_sandbox(admin: GatewayClient) -> None:
    score = await run_humaneval(admin, agents=2, limit=6)
    assert (score.problems, score.passed, score.failed) == (6, 6, {})
    assert score.per_second > 0


async def test_a_contended_ledger_ends_correct_and_serializable(admin: GatewayClient) -> None:
    score = await run_ledger(admin, agents=3, postings_per_agent=4, seed=7)
    assert (score.final_total, score.final_count) == (score.expected_total, 12)
    assert score.anomalies == [] and score.commits_checked == 12
    assert score.conflicts > 0  # three clerks on two keys do collide; none of it was lost


def test_the_agentdojo_table_has_one_cell_per_column() -> None:
    from conclave.bench.tasks.agentdojo_tasks import SuiteScore

    score = SuiteScore("banking", tasks=2, utility=2, reference=2, calls=3, cold_start_ms=900.0)
    score.tool_call_ms, score.tool_own_ms, score.store_ms = [12.0, 14.0], [2.0, 2.0], [3.0, 5.0]
    table = agentdojo_table([score])
    assert len(table.rows[0]) == len(table.columns)
    row = dict(zip(table.columns, table.rows[0], strict=True))
    assert (row["first call ms"], row["overhead p50 ms"]) == (900.0, 15.0)


def test_the_oracle_is_labelled_as_replaying_ground_truth_where_printed() -> None:
    from conclave.bench.tasks.agentdojo_tasks import SuiteScore

    title = agentdojo_table([SuiteScore("banking")]).title
    assert "oracle (replays ground truth)" in title
