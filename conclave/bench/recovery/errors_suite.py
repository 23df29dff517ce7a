"""`conclave bench errors`: recovering from failures, blind retry vs following SERF.

Tasks hit the fault tools (`tools.harness.faults`) through the gateway over real HTTP, each with one
failure mode: a flaky upstream (fails 1-3 times, then works), a rate limit, bad arguments,
a stale version (conflict), a tool outside the agent's allow-list, a permission refusal, and
a fatal bug. Three clients run the same seeded tasks:

- `blind`: retries any error with the same request, 20 ms apart, up to 5 calls in all;
- `status-aware` (the goal's reference: what a careful HTTP client does without SERF):
  reads only the HTTP status; retries 429 and 5xx (and a lost connection) with the same
  request and the SERF agent's own backoff schedule (`RecoveryPolicy.backoff_ms`: equal-jitter
  exponential from 20 ms, never below the gateway's retry-after), and stops on any other 4xx;
- `serf`: the SDK's `RecoveryPolicy` (5 calls at most), acting on `action` only, with the
  hooks an agent has: re-read the version (reread_and_retry), let the "model" fix the
  arguments from `param_hints` (fix_args: a scripted fixer clamping each hinted field into
  its range), use an allowed tool instead (switch_tool); no replan hook, so `replan` and
  `abort` stop at once.

Reported per failure mode and overall: recovery rate (tasks that ended in a result), calls
wasted (calls that failed), and the median time to recovery of the recovered tasks.
"""

from __future__ import annotations

import random
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from agents import GatewayCallError, GatewayClient, RecoveryHooks, RecoveryPolicy
from conclave.bench.core import BenchContext, Goal, SuiteResult, Table
from conclave.bench.recovery.fault_stack import fault_stack
from protocol import SerfError

MODES = ("transient", "rate_limited", "bad_args", "conflict", "not_allowed", "permission", "fatal")
CLIENTS = ("blind", "status-aware", "serf")
MAX_CALLS = 5
BLIND_PAUSE_S = 0.02
FAULT_TOOLS = ("flaky", "rate_limited", "strict_args", "versioned_put", "version_of",
               "forbidden", "broken", "echo")  # fmt: skip
Op = Callable[[], Awaitable[Any]]


@dataclass(frozen=True)
class Task:
    mode: str
    key: str
    param: int  # failures for transient, the window for rate_limited, the stale version...


@dataclass
class TaskOutcome:
    recovered: bool = False
    calls: int = 0
    failed_calls: int = 0
    seconds: float = 0.0


@dataclass
class Tally:
    outcomes: list[TaskOutcome] = field(default_factory=list)


def make_tasks(seed: int, per_mode: int) -> list[Task]:
    rng = random.Random(seed)
    tasks = []
    for mode in MODES:
        for _ in range(per_mode):
            param = {"transient": rng.randint(1, 3), "rate_limited": rng.choice((100, 200, 300)),
                     "conflict": rng.randint(1, 3)}.get(mode, 0)  # fmt: skip
            tasks.append(Task(mode, uuid.UUID(int=rng.getrandbits(128)).hex, param))
    return tasks


def _first_call(client: GatewayClient, task: Task, counter: TaskOutcome) -> Op:
    """The call the task needs, as the agent first tries it."""
    by_mode: dict[str, dict[str, Any]] = {
        "transient": {"key": task.key, "failures": task.param},
        "rate_limited": {"key": task.key, "limit": 1, "window_ms": task.param},
        "bad_args": {"count": 0},
        "conflict": {"key": task.key, "expected_version": 0},
        "not_allowed": {"command": "echo hi"},
        "permission": {"path": "/etc/shadow"},
        "fatal": {"reason": "a bug"},
    }
    arguments = by_mode[task.mode]
    tool = {"transient": "flaky", "bad_args": "strict_args", "conflict": "versioned_put",
            "not_allowed": "run_shell", "permission": "forbidden", "fatal": "broken"}.get(
        task.mode, task.mode)  # fmt: skip
    return _counted(client, tool, arguments, counter)


def _counted(client: GatewayClient, tool: str, arguments: dict[str, Any], out: TaskOutcome) -> Op:
    async def call() -> Any:
        out.calls += 1
        try:
            return await client.call_tool(tool, arguments)
        except GatewayCallError:
            out.failed_calls += 1
            raise

    return call


async def _prepare(client: GatewayClient, task: Task) -> None:
    """Set the stage: another writer moves the version on; a first call fills the window."""
    if task.mode == "conflict":
        for version in range(task.param):
            await client.call_tool("versioned_put", {"key": task.key, "expected_version": version})
    if task.mode == "rate_limited":
        await client.call_tool(
            "rate_limited", {"key": task.key, "limit": 1, "window_ms": task.param}
        )


async def run_blind(client: GatewayClient, task: Task) -> TaskOutcome:
    out = TaskOutcome()
    op = _first_call(client, task, out)
    for _ in range(MAX_CALLS):
        try:
            await op()
        except GatewayCallError:
            await anyio.sleep(BLIND_PAUSE_S)
            continue
        out.recovered = True
        break
    return out


def retryable_status(status: int | None) -> bool:
    """What an HTTP client may retry knowing only the status: 429, 5xx, or no answer at all."""
    return status is None or status == 429 or status >= 500


async def run_status_aware(client: GatewayClient, task: Task, seed: int) -> TaskOutcome:
    out = TaskOutcome()
    op = _first_call(client, task, out)
    schedule = RecoveryPolicy(max_attempts=MAX_CALLS, seed=seed, base_delay_ms=20)
    for retry in range(MAX_CALLS):
        try:
            await op()
        except GatewayCallError as exc:
            if not retryable_status(exc.status) or retry == MAX_CALLS - 1:
                break
            await anyio.sleep(schedule.backoff_ms(retry, exc.serf.retry_after_ms) / 1000)
            continue
        out.recovered = True
        break
    return out


async def run_serf(client: GatewayClient, task: Task, seed: int) -> TaskOutcome:
    out = TaskOutcome()

    async def reread(error: SerfError) -> Op:
        current = (await client.call_tool("version_of", {"key": task.key})).result
        args = {"key": task.key, "expected_version": current}
        return _counted(client, "versioned_put", args, out)

    async def fix_args(error: SerfError) -> Op | None:
        if "count" not in error.param_hints:  # the scripted model only knows this field
            return None
        return _counted(client, "strict_args", {"count": 1}, out)

    async def switch_tool(error: SerfError) -> Op:
        return _counted(client, "echo", {"message": "echo hi"}, out)

    hooks: RecoveryHooks[Any] = RecoveryHooks(
        reread=reread, fix_args=fix_args, switch_tool=switch_tool
    )
    policy = RecoveryPolicy(max_attempts=MAX_CALLS, seed=seed, base_delay_ms=20)
    try:
        await policy.run(_first_call(client, task, out), hooks)
        out.recovered = True
    except GatewayCallError:
        pass
    return out


async def _measure(url: str, token: Callable[[str], str], tasks: list[Task], seed: int,
                   tick: Callable[[], None]) -> dict[tuple[str, str], Tally]:  # fmt: skip
    tallies = {(m, c): Tally() for m in MODES for c in CLIENTS}
    no_retry = lambda e, a: None  # noqa: E731  the clients under test do all recovery
    async with GatewayClient(url, token("agent"), retry=no_retry) as client:
        for index, task in enumerate(tasks):
            for name in CLIENTS:
                # Each client gets its own copy of the world: a fresh key per run.
                own = Task(task.mode, f"{task.key}-{name}", task.param)
                await _prepare(client, own)
                began = time.perf_counter()
                if name == "blind":
                    outcome = await run_blind(client, own)
                elif name == "status-aware":
                    outcome = await run_status_aware(client, own, seed + index)
                else:
                    outcome = await run_serf(client, own, seed + index)
                outcome.seconds = time.perf_counter() - began
                tallies[(task.mode, name)].outcomes.append(outcome)
            tick()
    return tallies


def run(ctx: BenchContext) -> SuiteResult:
    tasks = make_tasks(ctx.seed, 6 if ctx.quick else 20)
    progress = ctx.progress.add_task("errors: tasks", total=len(tasks))
    allowed = [f"tool:{name}" for name in FAULT_TOOLS]
    with fault_stack(ctx, FAULT_TOOLS, breaker_failures=100_000) as stack:
        results = anyio.run(
            _measure,
            stack.url,
            lambda name: stack.token("bench", f"errors-{name}", allowed),
            tasks,
            ctx.seed,
            lambda: ctx.progress.advance(progress),
        )
    return _report(results)


def _row(label: str, client: str, outcomes: list[TaskOutcome]) -> list[Any]:
    recovered = [o for o in outcomes if o.recovered]
    ttr = statistics.median(o.seconds for o in recovered) * 1000 if recovered else float("nan")
    return [label, client, 100 * len(recovered) / len(outcomes), sum(o.calls for o in outcomes),
            sum(o.failed_calls for o in outcomes), ttr]  # fmt: skip


def _report(results: dict[tuple[str, str], Tally]) -> SuiteResult:
    table = Table(
        "Recovering from injected failures: blind retry, status-aware retry and SERF "
        f"(same tasks, {MAX_CALLS} calls at most)",
        ["failure mode", "client", "recovered %", "calls", "wasted calls", "median ms to recover"],
    )
    for mode in MODES:
        for client in CLIENTS:
            table.rows.append(_row(mode, client, results[(mode, client)].outcomes))
    totals = {c: [o for m in MODES for o in results[(m, c)].outcomes] for c in CLIENTS}
    for client in CLIENTS:
        table.rows.append(_row("all", client, totals[client]))
    wasted = {c: sum(o.failed_calls for o in totals[c]) for c in CLIENTS}
    rate = {c: 100 * sum(o.recovered for o in totals[c]) / len(totals[c]) for c in CLIENTS}
    samples = f"n={len(totals['serf'])} tasks per client"

    def fewer(than: str) -> float:
        return 100 * (1 - wasted["serf"] / wasted[than]) if wasted[than] else 0.0

    result = SuiteResult("errors", tables=[table])
    reference = fewer("status-aware")
    result.goals.append(Goal(
        f"SERF wastes fewer calls than status-aware retry ({samples})", ">= 30% fewer",
        f"{reference:.0f}% fewer ({wasted['serf']} vs {wasted['status-aware']})",
        reference >= 30,
    ))  # fmt: skip
    result.goals.append(Goal(
        f"SERF recovery rate vs status-aware retry ({samples})", ">= status-aware",
        f"{rate['serf']:.0f}% vs {rate['status-aware']:.0f}%",
        rate["serf"] >= rate["status-aware"],
    ))  # fmt: skip
    result.figures.update({
        "serf_fewer_wasted_pct": reference, "serf_fewer_wasted_than_blind_pct": fewer("blind"),
        "serf_recovery_pct": rate["serf"], "status_aware_recovery_pct": rate["status-aware"],
        "blind_recovery_pct": rate["blind"],
    })  # fmt: skip
    result.notes.append(
        f"blind retry, kept as a row: SERF wastes {fewer('blind'):.0f}% fewer calls "
        f"({wasted['serf']} vs {wasted['blind']}), recovery {rate['blind']:.0f}%"
    )
    return result
