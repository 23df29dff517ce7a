"""`conclave bench contention`: concurrent agents on shared state, against two baselines.

N agents (4, 16, 64; quick: 16) run each workload (see `contention_agents`) in each mode:
Conclave's ``owned`` and ``optimistic`` namespaces over the real HTTP API of the embedded
gateway (its own process), and, in the same process and run, the naive last-writer-wins
store and raw WATCH/MULTI straight on Redis, retried at once after an abort and, on the
contended workloads, retried after the agents' own backoff (`Backoff`): the fair baseline, the
one the counter goal reads. Every agent is a task of one asyncio client
process (uvloop; each agent on its own kept-alive connection, `conclave.bench.core.http1`), which
shares the machine's cores with the gateway and Redis. After each run the history checker
reads the namespace's stream: Conclave's runs must be serializable; the naive store's
anomalies must show.

The agents declare every read their write depends on in the commit's ``read_set``, as
WATCH/MULTI watches exactly the keys the transaction read, so their namespaces turn the
gateway's read log off (``validate_reads: false``): with it on, a commit is also checked
against the keys the session wrote before (the log keeps a writer's own writes), stricter than
the baseline, and the cross workload's blind writes would conflict where WATCH/MULTI's do not.

Saturating runs measure throughput: every agent commits back to back, so by Little's law a
commit's latency there is queueing behind the other agents' requests, and backing off after a
409 lowers it (fewer requests in flight) as it lowers throughput: the latency goals are read on
the paced runs (16 agents each thinking ~250 ms between transactions, as LLM agents do, which
leaves the gateway unsaturated); the saturating latencies are in the table.

The ops runs (`run_ops`): 16 agents on one hot key, each committing a state op back to back
(``increment`` by 1; ``append`` of a unique value), against the same counter on WATCH/MULTI
(GET+SET in a transaction, retried on abort) once with the agents' backoff (`Backoff`) and
once retrying at once, as the main table's baseline does. Each ops run is checked by the
history checker, and its final value against its commits: appends or increments lost.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from dataclasses import dataclass, replace

import anyio
from redis.asyncio import Redis

from conclave.bench.contention.baselines import NaiveStore
from conclave.bench.contention.contention_agents import (
    HttpAgent,
    RunProgress,
    run_http_agent,
    run_naive_agent,
    run_op_agent,
    run_watch_agent,
)
from conclave.bench.core import (
    NO_RATE_LIMITS,
    BenchContext,
    Goal,
    Http1Connection,
    SuiteResult,
    Table,
    encode_request,
    percentile,
)
from conclave.stack import EmbeddedStack
from gateway import connect_redis
from gateway.state import NamespaceKeys, check_namespace_history

TENANT = "bench"
WORKLOADS = ("counter", "dedicated", "cross")
CONCLAVE_MODES = ("optimistic", "owned")
CONTENDED = ("counter", "cross")
OP_MODE = "op"  # Conclave over HTTP, one state op per commit
WATCH_BACKOFF = "watch, backoff"  # WATCH/MULTI retried after the agents' backoff
WATCH_AT_ONCE = "watch, no backoff"  # WATCH/MULTI retried at once
MODES = ("watch", WATCH_BACKOFF, "naive", *CONCLAVE_MODES)  # "watch": retried at once


def modes(workload: str) -> tuple[str, ...]:
    """The modes run on `workload`: with no conflicts (dedicated keys) a backoff never waits,
    so WATCH/MULTI runs once."""
    return MODES if workload in CONTENDED else tuple(m for m in MODES if m != WATCH_BACKOFF)


OPS_RUNS = (
    ("increment", OP_MODE),
    ("increment", WATCH_BACKOFF),
    ("increment", WATCH_AT_ONCE),
    ("append", OP_MODE),
)
OPS_AGENTS = 16


@dataclass
class RunResult:
    workload: str
    mode: str
    agents: int
    commits: int
    seconds: float
    p50_ms: float
    p99_ms: float
    tx_p50_ms: float
    tx_p99_ms: float
    conflicts: int
    retries: int
    anomalies: int | None
    lost: int | None = None  # ops runs: commits whose effect is missing from the final value

    @property
    def commits_per_s(self) -> float:
        return self.commits / self.seconds if self.seconds else 0.0


class _Runner:
    def __init__(self, ctx: BenchContext, redis: Redis, limit_s: float) -> None:
        self.ctx = ctx
        self.limit_s = limit_s
        self.connections: dict[int, Http1Connection] = {}  # one per agent, kept across runs
        self.redis = redis
        self.prefix = uuid.uuid4().hex[:6]
        self.headers: dict[int, dict[str, str]] = {}

    def connection(self, index: int) -> Http1Connection:
        if index not in self.connections:
            self.connections[index] = Http1Connection(self.ctx.stack.url)
        return self.connections[index]

    async def aclose(self) -> None:
        for connection in self.connections.values():
            await connection.aclose()

    async def _create(self, namespace: str, mode: str) -> None:
        # Read log off: the agents declare every read in read_set (see the module docstring).
        raw = encode_request(
            "PUT", self.ctx.stack.url, f"/v1/state/{namespace}", self.agent_headers(0),
            json.dumps({"mode": mode, "validate_reads": False}).encode(),
        )  # fmt: skip
        status, answer = await self.connection(0).request(raw)
        if status not in (200, 201):
            raise RuntimeError(f"creating {namespace}: {status} {answer!r}")

    def agent_headers(self, index: int) -> dict[str, str]:
        if index not in self.headers:
            token = self.ctx.stack.token(TENANT, f"agent-{index}", ["state:*:write"])
            self.headers[index] = {"Authorization": f"Bearer {token}"}
        return self.headers[index]

    async def run(
        self, workload: str, mode: str, agents: int, target: int, pace_s: float = 0.0
    ) -> RunResult:
        paced = "paced-" if pace_s else ""
        namespace = f"{paced}{workload}-{mode}-{agents}-{self.prefix}"
        keys = NamespaceKeys(TENANT, namespace)
        # A paced agent holds a lease for one transaction; a saturating one for a batch.
        progress = RunProgress(target, self.limit_s, pace_s=pace_s, owned_batch=1 if pace_s else 8)
        if mode in CONCLAVE_MODES:
            await self._create(namespace, mode)
        started = time.perf_counter()
        async with anyio.create_task_group() as tasks:
            for index in range(agents):
                if mode in CONCLAVE_MODES:
                    rng = random.Random(self.ctx.seed * 1000 + index)
                    agent = HttpAgent(
                        self.connection(index), self.ctx.stack.url, self.agent_headers(index),
                        namespace, progress, rng,
                    )  # fmt: skip
                    tasks.start_soon(run_http_agent, agent, workload, index, mode == "owned")
                elif mode == "naive":
                    store = NaiveStore(self.redis, keys)
                    tasks.start_soon(run_naive_agent, store, workload, index, progress)
                else:
                    seed = self.ctx.seed * 1000 + index if mode == WATCH_BACKOFF else None
                    tasks.start_soon(
                        run_watch_agent, self.redis, keys, workload, index, progress, seed
                    )
        seconds = time.perf_counter() - started
        anomalies = None
        if mode in ("naive", *CONCLAVE_MODES):
            anomalies = len((await check_namespace_history(self.redis, keys)).anomalies)
        return RunResult(
            workload, mode, agents, progress.commits, seconds,
            percentile(progress.latencies_ms, 0.50), percentile(progress.latencies_ms, 0.99),
            percentile(progress.transactions_ms, 0.50),
            percentile(progress.transactions_ms, 0.99), progress.conflicts, progress.retries,
            anomalies,
        )  # fmt: skip

    async def run_ops(
        self, op: str, mode: str, agents: int, target: int, label: str = "ops"
    ) -> RunResult:
        """`agents` on one hot key: Conclave committing `op`, or WATCH/MULTI on the counter."""
        namespace = f"{label}-{op}-{mode.replace(', ', '-').replace(' ', '-')}-{self.prefix}"
        keys = NamespaceKeys(TENANT, namespace)
        progress = RunProgress(target, self.limit_s)
        if mode == OP_MODE:
            await self._create(namespace, "optimistic")
        started = time.perf_counter()
        async with anyio.create_task_group() as tasks:
            for index in range(agents):
                if mode == OP_MODE:
                    agent = HttpAgent(
                        self.connection(index), self.ctx.stack.url, self.agent_headers(index),
                        namespace, progress,
                    )  # fmt: skip
                    tasks.start_soon(run_op_agent, agent, op, index)
                else:
                    seed = self.ctx.seed * 1000 + index if mode == WATCH_BACKOFF else None
                    tasks.start_soon(
                        run_watch_agent, self.redis, keys, "counter", index, progress, seed
                    )
        seconds = time.perf_counter() - started
        anomalies = lost = None
        if mode == OP_MODE:
            anomalies = len((await check_namespace_history(self.redis, keys)).anomalies)
            raw = await self.redis.hget(
                keys.data("counter" if op == "increment" else "list"), "val"
            )
            final = json.loads(raw) if raw else None
            lost = progress.commits - int((final or 0) if op == "increment" else len(final or []))
        return RunResult(
            op, mode, agents, progress.commits, seconds,
            percentile(progress.latencies_ms, 0.50), percentile(progress.latencies_ms, 0.99),
            percentile(progress.transactions_ms, 0.50),
            percentile(progress.transactions_ms, 0.99), progress.conflicts, progress.retries,
            anomalies, lost,
        )  # fmt: skip


PACE_S = 0.25  # paced runs: each agent thinks ~250 ms between transactions, as LLM agents do
PACED_AGENTS = 16


async def run_contention(
    ctx: BenchContext,
    agent_counts: tuple[int, ...],
    target: int,
    paced_target: int,
    limit_s: float = float("inf"),
) -> tuple[list[RunResult], list[RunResult]]:
    """Every (agents, workload, mode) run, then the paced runs; each run ends after `target`
    commits or `limit_s` seconds, whichever comes first."""
    redis_url = ctx.stack.settings.redis_url
    assert redis_url
    redis = connect_redis(redis_url)
    results: list[RunResult] = []
    paced: list[RunResult] = []
    runs = len(agent_counts) * sum(len(modes(w)) for w in WORKLOADS)
    task = ctx.progress.add_task("contention", total=runs + len(CONTENDED) * len(CONCLAVE_MODES))
    runner = _Runner(ctx, redis, limit_s)
    try:
        for mode in ("optimistic", "watch"):  # warm-up: every agent's connection, caches
            await runner.run("dedicated", mode, max(agent_counts), 200)
        for agents in agent_counts:
            for workload in WORKLOADS:
                for mode in modes(workload):
                    ctx.progress.update(task, description=f"{workload} {mode} x{agents}")
                    results.append(await runner.run(workload, mode, agents, target))
                    ctx.progress.advance(task)
        for workload in CONTENDED:
            for mode in CONCLAVE_MODES:
                ctx.progress.update(task, description=f"paced {workload} {mode}")
                paced.append(await runner.run(workload, mode, PACED_AGENTS, paced_target, PACE_S))
                ctx.progress.advance(task)
    finally:
        await runner.aclose()
        await redis.aclose()
    return results, paced


async def run_ops(
    ctx: BenchContext, agents: int, target: int, limit_s: float = float("inf")
) -> list[RunResult]:
    """The ops runs (`OPS_RUNS`), each ending after `target` commits or `limit_s` seconds."""
    redis_url = ctx.stack.settings.redis_url
    assert redis_url
    redis = connect_redis(redis_url)
    task = ctx.progress.add_task("ops", total=len(OPS_RUNS))
    runner = _Runner(ctx, redis, limit_s)
    runs: list[RunResult] = []
    try:
        for mode in (OP_MODE, WATCH_AT_ONCE):  # warm-up: every agent's connection
            await runner.run_ops("increment", mode, agents, 200, "warm-up")
        for op, mode in OPS_RUNS:
            ctx.progress.update(task, description=f"ops: {op} {mode} x{agents}")
            runs.append(await runner.run_ops(op, mode, agents, target))
            ctx.progress.advance(task)
    finally:
        await runner.aclose()
        await redis.aclose()
    return runs


def _ops_ratio(runs: list[RunResult], run: RunResult) -> float | None:
    """`run`'s commits/s over WATCH/MULTI's on the counter with the same backoff."""
    for other in runs:
        if other.mode == WATCH_BACKOFF and other.commits_per_s:
            return run.commits_per_s / other.commits_per_s
    return None


def _ops_table(runs: list[RunResult]) -> Table:
    table = Table(
        f"State ops: {OPS_AGENTS} agents on one hot key (Conclave over HTTP; WATCH/MULTI "
        "straight on Redis, GET+SET retried on abort)",
        ["workload", "mode", "agents", "commits", "commits/s", "p50 ms", "p99 ms", "retries",
         "anomalies", "lost", "vs WATCH/MULTI, same backoff"],
    )  # fmt: skip
    for r in runs:
        ratio = _ops_ratio(runs, r) if r.workload == "increment" else None
        table.rows.append([
            r.workload, r.mode, r.agents, r.commits, r.commits_per_s, r.p50_ms, r.p99_ms,
            r.retries, "-" if r.anomalies is None else r.anomalies,
            "-" if r.lost is None else r.lost, "-" if ratio is None else f"{ratio:.1f}x",
        ])  # fmt: skip
    return table


def _ops_goals(runs: list[RunResult]) -> list[Goal]:
    goals: list[Goal] = []
    by = {(r.workload, r.mode): r for r in runs}
    increment, append = by.get(("increment", OP_MODE)), by.get(("append", OP_MODE))
    if increment is not None:
        ratio = _ops_ratio(runs, increment)
        goals.append(
            Goal(f"increment commits/s vs WATCH/MULTI, same backoff ({increment.agents})",
                 ">= 5x", "-" if ratio is None else f"{ratio:.1f}x",
                 ratio is not None and ratio >= 5)
        )  # fmt: skip
        goals.append(
            Goal("increment: anomalies, increments lost", "0, 0",
                 f"{increment.anomalies}, {increment.lost}",
                 increment.anomalies == 0 and increment.lost == 0)
        )  # fmt: skip
    if append is not None:
        goals.append(
            Goal(f"appends lost, {append.agents} agents on one list", "0",
                 f"{append.lost} of {append.commits} (anomalies {append.anomalies})",
                 append.lost == 0 and append.anomalies == 0)
        )  # fmt: skip
    return goals


def _ratio(results: list[RunResult], run: RunResult, baseline: str = "watch") -> float | None:
    """`run`'s commits/s over the `baseline` mode's on the same workload and agents."""
    for other in results:
        if (other.workload, other.agents, other.mode) == (run.workload, run.agents, baseline):
            return run.commits_per_s / other.commits_per_s if other.commits_per_s else None
    return None


def run(ctx: BenchContext) -> SuiteResult:
    """On a gateway of its own with the rate limiters out of the way: it measures the store
    under contention (16 agents of one tenant pass the default tenant bucket's 1,000/s)."""
    settings = ctx.stack.settings.model_copy(update={"port": 0, **NO_RATE_LIMITS})
    with EmbeddedStack(settings, log_path=ctx.gateway_log("contention")) as stack:
        return _run(replace(ctx, stack=stack))


def _run(ctx: BenchContext) -> SuiteResult:
    agent_counts = (16,) if ctx.quick else (4, 16, 64)
    # Full: 8,500 commits per run, so the contended Conclave runs add up to > 100,000 where
    # the machine is fast enough; a time limit per run bounds the suite where it is not.
    target, paced_target, limit_s = (2000, 400, 12.0) if ctx.quick else (8500, 1000, 60.0)
    results, paced = anyio.run(
        run_contention,
        ctx,
        agent_counts,
        target,
        paced_target,
        limit_s,
        backend_options={"use_uvloop": True},
    )
    ops = anyio.run(run_ops, ctx, OPS_AGENTS, target, limit_s, backend_options={"use_uvloop": True})
    table = _table(results)
    paced_table = Table(
        f"Paced agents: {PACED_AGENTS} agents, each thinking ~{PACE_S * 1000:.0f} ms between "
        "transactions (Conclave over HTTP)",
        [
            "workload",
            "mode",
            "commits",
            "commits/s",
            "p50 ms",
            "p99 ms",
            "tx p50",
            "tx p99",
            "409s",
            "anomalies",
        ],
    )
    for r in paced:
        paced_table.rows.append([
            r.workload, r.mode, r.commits, r.commits_per_s, r.p50_ms, r.p99_ms, r.tx_p50_ms,
            r.tx_p99_ms, r.conflicts, r.anomalies,
        ])  # fmt: skip
    return SuiteResult(
        "contention",
        tables=[table, paced_table, _ops_table(ops)],
        goals=_goals(results, paced) + _ops_goals(ops),
        figures=_figures(results) | _figures(paced, "paced_") | _figures(ops, "ops_"),
        series={
            "runs": [r.__dict__ for r in results],
            "paced": [r.__dict__ for r in paced],
            "ops": [r.__dict__ for r in ops],
        },
        notes=[
            "p50/p99: the commit request (WATCH/MULTI: the whole transaction); tx: from the "
            "start of a transaction to its commit, with refused attempts, backoff and lease waits"
        ],
    )


def _table(results: list[RunResult]) -> Table:
    table = Table(
        "Shared state under contention (Conclave over HTTP; baselines straight on Redis)",
        ["workload", "mode", "agents", "commits", "commits/s", "p50 ms", "p99 ms", "tx p50",
         "tx p99", "409s", "retries", "anomalies", "vs WATCH/MULTI at once",
         "vs WATCH/MULTI, same backoff"],
    )  # fmt: skip
    for r in results:
        ratios = [
            _ratio(results, r, b) if r.mode in CONCLAVE_MODES else None
            for b in ("watch", WATCH_BACKOFF)
        ]
        table.rows.append([
            r.workload, r.mode, r.agents, r.commits, r.commits_per_s, r.p50_ms, r.p99_ms,
            r.tx_p50_ms, r.tx_p99_ms, r.conflicts, r.retries,
            "-" if r.anomalies is None else r.anomalies,
            *("-" if ratio is None else f"{ratio:.0%}" for ratio in ratios),
        ])  # fmt: skip
    return table


def _figures(results: list[RunResult], prefix: str = "") -> dict[str, float]:
    figures: dict[str, float] = {}
    for r in results:
        mode = r.mode.replace(", ", "_").replace(" ", "_")
        name = f"{prefix}{r.workload}_{mode}_{r.agents}"
        figures[f"{name}_commits_per_s"] = round(r.commits_per_s, 1)
        figures[f"{name}_p50_ms"] = round(r.p50_ms, 3)
        figures[f"{name}_p99_ms"] = round(r.p99_ms, 3)
    return figures


def _goals(results: list[RunResult], paced: list[RunResult]) -> list[Goal]:
    conclave = [r for r in results if r.mode in CONCLAVE_MODES] + paced
    anomalies = sum(r.anomalies or 0 for r in conclave)
    contended = sum(r.commits for r in conclave if r.workload in CONTENDED)
    naive = sum(r.anomalies or 0 for r in results if r.mode == "naive")
    saturating = [r for r in results if r.mode in CONCLAVE_MODES]
    at16 = [r for r in saturating if r.agents == 16 and r.workload in CONTENDED]
    goals = [
        Goal("zero anomalies, Conclave modes", "0 over >= 100,000 contended commits",
             f"{anomalies} over {contended:,}", anomalies == 0 and contended >= 100_000),
        Goal("naive baseline shows anomalies", "> 0", str(naive), naive > 0),
    ]  # fmt: skip
    if paced:
        p50 = max(paced, key=lambda r: r.p50_ms)
        p99 = max(paced, key=lambda r: r.p99_ms)
        goals += [
            Goal("contended commit p50, 16 agents (paced; worst run)", "<= 3 ms",
                 f"{p50.p50_ms:.2f} ms ({p50.workload} {p50.mode})", p50.p50_ms <= 3),
            Goal("contended commit p99, 16 agents (paced; worst run)", "<= 15 ms",
                 f"{p99.p99_ms:.2f} ms ({p99.workload} {p99.mode})", p99.p99_ms <= 15),
        ]  # fmt: skip
    for run in (r for r in at16 if r.mode == "optimistic"):
        ratio = _ratio(results, run)
        if ratio is not None:
            goals.append(
                Goal(f"commits/s vs WATCH/MULTI retried at once ({run.workload}, optimistic, "
                     "16)", ">= 50%", f"{ratio:.0%}", ratio >= 0.5)
            )  # fmt: skip
    for run in (r for r in at16 if r.workload == "counter"):
        ratio = _ratio(results, run, WATCH_BACKOFF)
        if ratio is not None:
            goals.append(
                Goal(f"commits/s vs WATCH/MULTI, same backoff (counter, {run.mode}, 16)",
                     ">= 100%", f"{ratio:.0%}", ratio >= 1.0)
            )  # fmt: skip
    return goals
