"""`conclave bench tasks --topology`: teams of agents on AgentDojo and HumanEval through a
real gateway (an `EmbeddedStack`), one budget per task, and the topologies compared."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from agents import GatewayClient
from conclave.bench.tasks.humaneval_tasks import run_humaneval
from conclave.bench.tasks.task_models import TaskOptions
from conclave.bench.tasks.topologies import TeamBudget, word_tokens
from conclave.stack import EmbeddedStack
from gateway import Settings

if TYPE_CHECKING:
    from conclave.bench.tasks.team_runs import TeamModels

pytestmark = pytest.mark.anyio
TOPOLOGIES = ["single", "independent", "centralized", "decentralized"]
BANKING = {"banking": ["user_task_0", "user_task_3"]}
PROBLEMS = ["HumanEval/0", "HumanEval/2"]
# `conclave.bench.tasks.agentdojo_tasks` and `team_runs` (which imports it) are imported where they
# are used, not here: they import agentdojo (about 5 s), which every pytest process would pay
# at collection, run or not.


@pytest.fixture(scope="module")
def stack(redis_url: str) -> Iterator[EmbeddedStack]:
    modules = (*Settings().tool_modules, "tools.harness.agentdojo_suites")
    settings = Settings(
        redis_url=redis_url, port=0, sandbox_backend="process", tool_modules=modules
    )
    with EmbeddedStack(settings) as running:
        yield running


@pytest.fixture
async def admin(stack: EmbeddedStack) -> AsyncIterator[GatewayClient]:
    key = stack.settings.admin_key.get_secret_value()
    async with GatewayClient(stack.url, admin_key=key) as client:
        yield client


async def _run(
    admin: GatewayClient, topology: str, models: TeamModels, logs: Path
) -> tuple[int, int]:
    """AgentDojo's banking tasks and a few HumanEval problems by the team `topology`."""
    from conclave.bench.tasks.agentdojo_tasks import run_agentdojo
    from conclave.bench.tasks.team_runs import agentdojo_team, humaneval_team

    with (logs / "agentdojo-tasks.jsonl").open("a") as log:
        [score] = await run_agentdojo(
            admin, task_ids=BANKING, suites=["banking"], log=log,
            team=agentdojo_team(admin, topology, models),
        )  # fmt: skip
    complete, note = humaneval_team(admin, topology, models)
    with (logs / "humaneval-tasks.jsonl").open("a") as log:
        human = await run_humaneval(
            admin, agents=1, task_ids=PROBLEMS, complete=complete, log=log, note=note
        )
    return score.utility, human.passed


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("topology", TOPOLOGIES)
async def test_each_topology_of_oracles_solves_the_tasks(
    admin: GatewayClient, topology: str, tmp_path: Path
) -> None:
    from conclave.bench.tasks.team_runs import TeamModels

    solved = await _run(admin, topology, TeamModels("scripted:oracle"), tmp_path)
    assert solved == (2, 2)
    logged = _lines(tmp_path / "agentdojo-tasks.jsonl") + _lines(tmp_path / "humaneval-tasks.jsonl")
    size = 1 if topology == "single" else 3 + (topology == "centralized")
    for entry in logged:
        team = entry["team"]
        assert team["topology"] == topology and team["budget_exhausted"] is None
        assert len(team["agents"]) == size, team  # each member its own identity and usage
        assert team["tokens"] == sum(a["tokens"] for a in team["agents"].values()) > 0
        assert not any(a["tool_errors"] or a["wrong_steps"] for a in team["agents"].values())
    assert all(entry["calls"] for entry in logged[:2])  # AgentDojo: the team acted


async def test_a_noisy_comparison_has_a_row_per_topology_that_the_logs_bear_out(
    admin: GatewayClient, tmp_path: Path
) -> None:
    from conclave.bench.tasks.team_runs import TeamModels, comparison

    noisy = TeamModels("scripted:noisy:0.5", seed=3)
    for topology in TOPOLOGIES:
        await _run(admin, topology, noisy, tmp_path)
    logs = [tmp_path / "agentdojo-tasks.jsonl", tmp_path / "humaneval-tasks.jsonl"]
    table = comparison(logs, TOPOLOGIES)
    rows = {row[0]: dict(zip(table.columns, row, strict=True)) for row in table.rows}
    assert list(rows) == TOPOLOGIES
    assert rows["single"]["error amplification"] == 1.0
    logged = [entry for path in logs for entry in _lines(path)]
    for topology, row in rows.items():
        mine = [e for e in logged if e["team"]["topology"] == topology]
        won = sum(bool(e.get("utility", e.get("passed"))) for e in mine)
        calls = sum(a["tool_calls"] for e in mine for a in e["team"]["agents"].values())
        assert row["tasks"] == len(mine) == 4
        assert row["success %"] == pytest.approx(100 * won / 4)
        assert row["tool calls/task"] == pytest.approx(calls / 4)
        assert row["spoiled steps/task"] > 0  # the noise did spoil steps
    assert rows["single"]["success %"] < 100  # and spoiled steps failed tasks


async def test_a_team_over_its_token_budget_fails_the_task_and_says_so(
    admin: GatewayClient, tmp_path: Path
) -> None:
    from conclave.bench.tasks.team_runs import TeamModels

    tight = TeamModels("scripted:oracle", tokens=150)
    assert await _run(admin, "centralized", tight, tmp_path) == (0, 0)
    for path in ("agentdojo-tasks.jsonl", "humaneval-tasks.jsonl"):
        for entry in _lines(tmp_path / path):
            assert "token budget exhausted" in entry["team"]["budget_exhausted"]
            assert entry["team"]["tokens"] >= 150


def test_scripted_models_are_counted_by_words() -> None:
    from agents import ChatReply

    messages = [{"role": "user", "content": "pay the bill please"}]
    assert word_tokens(messages, ChatReply(content="done it")) == 6
    assert TeamBudget().tokens > 0


def _options(model: str, topology: str, attack: str | None = None) -> TaskOptions:
    return TaskOptions.parse(
        model=model, suites=[], tasks="all", topology=topology, attack=attack,
        least_privilege=False,
    )  # fmt: skip


def test_topology_options_run_each_team_beside_the_single_agent() -> None:
    assert _options("scripted:oracle", "all").team_topologies == TOPOLOGIES
    assert _options("scripted:oracle", "centralized").team_topologies == ["single", "centralized"]
    assert _options("scripted:oracle", "single").team_topologies == []  # the plain run
    noisy = _options("scripted:noisy:0.2", "single")
    assert noisy.team_topologies == ["single"] and "scripted" in noisy.label
    for model, topology, attack in (
        ("scripted:oracle", "star", None),
        ("scripted:noisy:2", "all", None),
        ("scripted:oracle", "all", "important_instructions"),
    ):
        with pytest.raises(ValueError):
            _options(model, topology, attack)
