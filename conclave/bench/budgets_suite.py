"""`conclave bench budgets`: chains of tool calls under one deadline, fixed timeouts vs ATBA.

Each chain is 3-6 calls to four tools with heavy-tailed latencies (lognormal and Pareto,
drawn in the sandbox from a seed, see `tools.harness.faults.CHAIN_PROFILES`). Every chain runs under
every policy, over real HTTP through the gateway, with the same latency draws (attempt k of
call i always gets the same seed), for deadlines from tight to loose:

- `fixed-60s`: every call may run the common 60 s default; the client does not start a call
  after the deadline, but a call in flight runs to its end.
- `fixed-split`: every call gets deadline / n; a killed call is retried with the same timeout
  while the deadline has not passed.
- `atba`: the deadline and the remaining plan go to the gateway, which grants each call its
  share from the tools' latency windows and kills it there; a killed call is retried (SERF
  says `replan`: the step is replanned as itself), a refused one (BUDGET_EXHAUSTED) ends the
  chain without starting work.

Time is scaled down 25x so a run takes a minute or two: tool medians are 32-140 ms (the
platform's own per-call cost, tens of ms on a loaded 2-core sandbox host, must stay small
next to them), and "60 s" is 2.4 s.
A chain *completes* when every call succeeded by the deadline; a *violation* is a chain with
a call that ran (finished or was killed) past the deadline; *wasted* is time in calls that
were killed, or whose
results were thrown away because the chain failed.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass

import anyio

from agents import GatewayCallError, GatewayClient
from conclave.bench.fault_stack import fault_stack
from conclave.bench.suite import BenchContext, Goal, SuiteResult, Table
from protocol import Budget, ErrorCode, ResourceRequest
from tools.harness.faults import CHAIN_PROFILES

SCALE = 25  # one bench millisecond stands for 25 ms
DEFAULT_TIMEOUT_MS = 60_000 // SCALE
DEADLINES_MS = (280, 400, 560, 800, 1_120, 1_600)
POLICIES = ("fixed-60s", "fixed-split", "atba")
WORKERS = 2
TOOLS = tuple(CHAIN_PROFILES)


@dataclass(frozen=True)
class Chain:
    tools: tuple[str, ...]
    base_seed: int

    def seed(self, step: int, attempt: int) -> int:
        return (self.base_seed + 7_919 * step + 104_729 * attempt) % 2**31


@dataclass
class ChainOutcome:
    completed: bool = False
    violated: bool = False
    refused: bool = False
    killed: int = 0
    wasted_ms: float = 0.0


def _now_ms() -> float:
    return time.time() * 1000


async def run_chain(
    client: GatewayClient, policy: str, chain: Chain, deadline_rel_ms: int
) -> ChainOutcome:
    outcome = ChainOutcome()
    began = _now_ms()
    deadline = began + deadline_rel_ms
    useful_ms = 0.0
    done = 0
    worked_until = began  # when the last call that ran (finished or killed) answered
    split = max(1, deadline_rel_ms // len(chain.tools))
    for step, tool in enumerate(chain.tools):
        attempt = 0
        while _now_ms() < deadline:
            budget, limits = None, None
            if policy == "atba":
                budget = Budget(deadline_ms=int(deadline), plan=chain.tools[step:])
            else:
                timeout = DEFAULT_TIMEOUT_MS if policy == "fixed-60s" else split
                limits = ResourceRequest(timeout_ms=timeout)
            started = _now_ms()
            try:
                await client.call_tool(
                    tool, {"seed": chain.seed(step, attempt)}, limits=limits, budget=budget
                )
            except GatewayCallError as exc:
                if exc.serf.code is ErrorCode.TOOL_TIMEOUT:
                    worked_until = _now_ms()
                    outcome.killed += 1
                    outcome.wasted_ms += worked_until - started
                    attempt += 1
                    continue
                if exc.serf.code in (ErrorCode.BUDGET_EXHAUSTED, ErrorCode.DEADLINE_EXCEEDED):
                    outcome.refused = True
                    break
                raise
            worked_until = _now_ms()
            useful_ms += worked_until - started
            done += 1
            break
        if done <= step:
            break
    # A refusal that arrives late ran nothing: only work past the deadline is a violation.
    outcome.violated = worked_until > deadline
    outcome.completed = done == len(chain.tools) and not outcome.violated
    if not outcome.completed:
        outcome.wasted_ms += useful_ms
    return outcome


def make_chains(seed: int, count: int) -> list[Chain]:
    rng = random.Random(seed)
    chains = []
    for _ in range(count):
        length = rng.randint(3, 6)
        chains.append(Chain(tuple(rng.choice(TOOLS) for _ in range(length)), rng.getrandbits(30)))
    return chains


async def _warm_up(client: GatewayClient, per_tool: int, seed: int) -> None:
    """Fill each tool's latency window with full (uncensored) samples first, one tool per
    task, so the samples measure the tools rather than a queue of a hundred calls."""

    async def one_tool(tool: str) -> None:
        for index in range(per_tool):
            await client.call_tool(tool, {"seed": seed * 1_000 + index})

    async with anyio.create_task_group() as group:
        for tool in TOOLS:
            group.start_soon(one_tool, tool)


async def _measure(
    url: str, token: Callable[[str], str], chains: list[Chain], seed: int, tick: Callable[[], None]
) -> dict[tuple[int, str], list[ChainOutcome]]:
    results: dict[tuple[int, str], list[ChainOutcome]] = {
        (d, p): [] for d in DEADLINES_MS for p in POLICIES
    }
    jobs = [(d, c) for d in DEADLINES_MS for c in chains]
    random.Random(seed).shuffle(jobs)  # no deadline always runs on a warmer or colder stack
    async with GatewayClient(url, token("warmup"), retry=lambda e, a: None) as warm:
        await _warm_up(warm, 30, seed)

    async def worker(index: int) -> None:
        async with GatewayClient(url, token(f"w{index}"), retry=lambda e, a: None) as client:
            # Each identity has its own sandboxes: start this worker's before its first
            # chain, so no policy's first chain pays a cold start that the others do not.
            await client.call_tool(TOOLS[0], {"seed": seed})
            while jobs:
                deadline, chain = jobs.pop()
                for policy in POLICIES:
                    results[(deadline, policy)].append(
                        await run_chain(client, policy, chain, deadline)
                    )
                tick()

    async with anyio.create_task_group() as group:
        for index in range(WORKERS):
            group.start_soon(worker, index)
    return results


def run(ctx: BenchContext) -> SuiteResult:
    chains = make_chains(ctx.seed, 20 if ctx.quick else 60)
    task = ctx.progress.add_task("budgets: chains", total=len(chains) * len(DEADLINES_MS))
    with fault_stack(ctx, TOOLS, breaker_failures=100_000) as stack:

        def token(name: str) -> str:
            return stack.token("bench", f"budgets-{name}", ["tool:chain_*"])

        results = anyio.run(
            _measure, stack.url, token, chains, ctx.seed, lambda: ctx.progress.advance(task)
        )
    return _report(results, len(chains))


def _report(results: dict[tuple[int, str], list[ChainOutcome]], count: int) -> SuiteResult:
    table = Table(
        f"Chains of 3-6 heavy-tailed calls under a deadline ({count} chains each; time 1/{SCALE})",
        ["deadline ms", "policy", "completed %", "violations", "wasted s", "killed", "refused"],
    )
    completion: dict[tuple[int, str], float] = {}
    for deadline in DEADLINES_MS:
        for policy in POLICIES:
            runs = results[(deadline, policy)]
            rate = 100 * sum(r.completed for r in runs) / len(runs)
            completion[(deadline, policy)] = rate
            table.rows.append([
                deadline, policy, rate, sum(r.violated for r in runs),
                sum(r.wasted_ms for r in runs) / 1000, sum(r.killed for r in runs),
                sum(r.refused for r in runs),
            ])  # fmt: skip
    result = SuiteResult("budgets", tables=[table])
    reachable = [d for d in DEADLINES_MS if max(completion[(d, p)] for p in POLICIES) >= 50]
    atba_violations = sum(r.violated for d in DEADLINES_MS for r in results[(d, "atba")])
    if reachable:
        tight = reachable[0]
        best_fixed = max(completion[(tight, p)] for p in POLICIES if p != "atba")
        gain = completion[(tight, "atba")] - best_fixed
        result.goals.append(
            Goal(
                f"ATBA completion vs best fixed policy at {tight} ms",
                ">= +15 points",
                f"{gain:+.1f} points ({completion[(tight, 'atba')]:.0f}% vs {best_fixed:.0f}%)",
                gain >= 15,
            )
        )
        result.figures["atba_gain_points"] = gain
    result.goals.append(
        Goal("ATBA deadline violations", "0", str(atba_violations), atba_violations == 0)
    )
    result.series["completion"] = {
        policy: [[d, completion[(d, policy)]] for d in DEADLINES_MS] for policy in POLICIES
    }
    scaled = f"time scaled 1/{SCALE}: tool medians 32-140 ms"
    result.notes.append(f"{scaled}, the 60 s default is {DEFAULT_TIMEOUT_MS} ms")
    return result
