"""`conclave bench chaos`: commits, leases and tool calls through two gateway replicas while
Redis masters, gateways, a Docker engine and sandboxes are killed on a fixed schedule.

For each durability mode (`async`, then `replicated`) the suite starts a six-node Redis
Cluster (`LocalRedisCluster`), two gateway processes on it behind HAProxy, their sandboxes
on two Docker engines (the machine's, and a spare dockerd of the suite's own, so restarting
an engine disturbs no one else's), and the callers of `chaos_workload`: committers (a fresh
key per commit, idempotency key, history-checked namespace), lease takers on one fenced key,
and echo callers, each request with a 2 s deadline. Then, one after the other, it injects:
SIGKILL of the namespace's Redis master (its replica is promoted; the killed node rejoins as
a replica), SIGKILL of a gateway process while commits are in flight (it is started again),
a restart of the spare dockerd, `docker kill` of every sandbox container, and
SIGSTOP of the master for longer than the deadlines (then SIGCONT). After each fault it waits
for the first commit, lease and tool call to succeed again (the recovery time), for the
cluster to have every master with an online replica, and runs the history checker.

At the end it reads every acknowledged commit back (lost: not there at the version its
acknowledgement named; a loss is booked to the first fault injected after the ack), counts
fencing tokens granted twice, and, once everything is stopped, the gateway processes still
alive and sandbox containers of its gateways left on either engine.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import httpx
from rich.progress import TaskID

from conclave.bench.chaos.chaos_faults import (
    SpareEngine,
    containers_of,
    haproxy,
    kill_containers,
    kill_master,
    pause_master,
    wait_cluster_settled,
)
from conclave.bench.chaos.chaos_workload import NO_ANSWER, Callers, Recorder, reissued_tokens
from conclave.bench.chaos.redis_cluster import LocalRedisCluster
from conclave.bench.core import BenchContext, Goal, SuiteResult, Table
from conclave.stack import EmbeddedStack, free_port
from gateway import Settings, connect_redis
from gateway.state import NamespaceKeys, check_namespace_history

MODES = ("async", "replicated")
TENANT = "chaos"
LEDGER, FENCED = "ledger", "fenced"
COMMITTERS, LEASE_TAKERS, TOOL_CALLERS = 3, 2, 2
CALM_S = 1.0
PAUSE_S = 3.0  # longer than the callers' 2 s deadline
RECOVERY_LIMIT_S = 30.0  # past this a fault's row says "not recovered"
RECOVERY_GOAL_S = 10.0
KINDS = ("commit", "lease", "tool")
COLUMNS = [
    "durability",
    "fault",
    "requests ok",
    "failed, by SERF code",
    "no answer",
    "past deadline + 1 s",
    "acked commits lost",
    "anomalies",
    "tokens reissued",
    "recovery s",
]
MASTER_KILL = "Redis master SIGKILL (failover)"
GATEWAY_KILL = "gateway process SIGKILL mid-commit"
ENGINE_RESTART = "Docker engine restart (SIGTERM, start)"
CONTAINER_KILL = "docker kill every sandbox container"
REDIS_PAUSE = f"Redis master SIGSTOP {PAUSE_S:.0f} s"


@dataclass
class FaultRow:
    name: str
    injected_at: float
    recovery_s: float | None = None
    anomalies: int = 0


@dataclass
class ModeResult:
    mode: str
    rows: list[FaultRow] = field(default_factory=list)
    recorder: Recorder = field(default_factory=Recorder)
    lost: Counter[str] = field(default_factory=Counter)
    reissued: Counter[str] = field(default_factory=Counter)
    acked: int = 0
    leaked_containers: int = 0
    leaked_processes: int = 0
    forced_failovers: int = 0  # replicas told to take over after 15 s without an election
    leaked_samples: list[str] = field(default_factory=list)  # a few containers left
    lost_samples: list[str] = field(default_factory=list)  # a few lost acks, as read back
    seconds: dict[str, float] = field(default_factory=dict)  # how long each step took


def _schedule(quick: bool) -> list[str]:
    """The faults in order; the full run kills a master five times, the quick run once."""
    if quick:
        return [MASTER_KILL, GATEWAY_KILL, ENGINE_RESTART, CONTAINER_KILL, REDIS_PAUSE]
    return [
        MASTER_KILL, GATEWAY_KILL, MASTER_KILL, ENGINE_RESTART, MASTER_KILL,
        CONTAINER_KILL, MASTER_KILL, REDIS_PAUSE, MASTER_KILL,
    ]  # fmt: skip


class ChaosRun:
    """One durability mode's run: the cluster, two gateways behind HAProxy, the callers."""

    def __init__(self, ctx: BenchContext, mode: str, spare: SpareEngine) -> None:
        self.ctx = ctx
        self.mode = mode
        self.spare = spare
        self.result = ModeResult(mode)
        self.cluster = LocalRedisCluster()
        self.stacks: list[EmbeddedStack] = []
        self.gateway_pids: set[int] = set()
        self.settings: Settings | None = None

    @property
    def engines(self) -> list[str]:
        assert self.settings is not None
        return list(self.settings.engine_hosts)

    def run(self) -> ModeResult:
        started = time.monotonic()
        self.cluster.start()
        try:
            base = self.ctx.stack.settings
            self.settings = base.model_copy(
                update={
                    "redis_url": self.cluster.url,
                    "sandbox_backend": "docker",
                    "docker_hosts": (base.docker_host, self.spare.host),
                    "durability": self.mode,
                    "workers": 1,
                    "shutdown_grace_s": 0.5,
                }
            )
            for _ in range(2):
                self.stacks.append(self._start_gateway(free_port()))
            self.result.seconds["start"] = time.monotonic() - started
            with haproxy([s.url for s in self.stacks], self.ctx.out_dir) as url:
                anyio.run(self._drive, url)
            self.result.seconds["run"] = time.monotonic() - started
        finally:
            for stack in self.stacks:
                stack.stop()
            self.cluster.stop()
        self._count_leaks()
        self.result.seconds["stopped"] = time.monotonic() - started
        return self.result

    def _start_gateway(self, port: int) -> EmbeddedStack:
        assert self.settings is not None
        log_path = self.ctx.gateway_log(f"chaos-{self.mode}")
        stack = EmbeddedStack(self.settings.model_copy(update={"port": port}), log_path=log_path)
        stack.start(timeout_s=60)  # a loaded machine: the bench shares its 2 cores
        self.gateway_pids.update(int(i.rsplit(":", 1)[1]) for i in stack.instances)
        return stack

    async def _drive(self, url: str) -> None:
        stack = self.stacks[0]
        scopes = ["state:*:write", "tool:echo"]
        agents = [f"c{i}" for i in range(COMMITTERS)] + [f"l{i}" for i in range(LEASE_TAKERS)]
        agents += [f"t{i}" for i in range(TOOL_CALLERS)]
        headers = {a: {"Authorization": f"Bearer {stack.token(TENANT, a, scopes)}"} for a in agents}
        await wait_until_async(lambda: _answers(url), 10)  # HAProxy forwarding
        # a replica that never synced refuses to fail over: start from a settled cluster
        await anyio.to_thread.run_sync(wait_cluster_settled, self.cluster)
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            for namespace, mode in ((LEDGER, "optimistic"), (FENCED, "owned")):
                created = await client.put(
                    f"/v1/state/{namespace}", json={"mode": mode}, headers=headers["c0"]
                )
                created.raise_for_status()
        recorder = self.result.recorder
        callers = Callers(url, recorder, headers)
        run_id = uuid.uuid4().hex[:8]
        async with anyio.create_task_group() as tasks:
            for i in range(COMMITTERS):
                tasks.start_soon(callers.committer, f"c{i}", LEDGER, run_id)
            for i in range(LEASE_TAKERS):
                tasks.start_soon(callers.lease_taker, f"l{i}", FENCED)
            for i in range(TOOL_CALLERS):
                tasks.start_soon(callers.tool_caller, f"t{i}")
            await anyio.sleep(CALM_S)
            for name in _schedule(self.ctx.quick):
                await self._inject(name, recorder)
            callers.stopping = True
        await self._check_acks(url, headers["c0"])
        self.result.reissued = reissued_tokens(recorder.grants)

    async def _inject(self, name: str, recorder: Recorder) -> None:
        label = f"{name} #{sum(r.name.startswith(name) for r in self.result.rows) + 1}"
        row = FaultRow(label, time.monotonic())
        self.result.rows.append(row)
        recorder.phase = label
        await anyio.to_thread.run_sync(self._fault_action(name))

        def recovered() -> bool:
            return all(k in recorder.log(label).first_ok_at for k in KINDS)

        try:
            await wait_until_async(recovered, RECOVERY_LIMIT_S)
            row.recovery_s = max(recorder.log(label).first_ok_at.values()) - row.injected_at
        except TimeoutError:
            row.recovery_s = None
        await anyio.to_thread.run_sync(wait_cluster_settled, self.cluster)
        before = sum(r.anomalies for r in self.result.rows)
        row.anomalies = await self._anomalies() - before

    def _fault_action(self, name: str) -> Callable[[], object]:
        key = NamespaceKeys(TENANT, LEDGER).history
        if name == MASTER_KILL:
            return lambda: self._kill_master(key)
        if name == REDIS_PAUSE:
            return lambda: pause_master(self.cluster, key, PAUSE_S)
        if name == GATEWAY_KILL:
            return self._kill_gateway
        if name == ENGINE_RESTART:
            return self.spare.restart
        return lambda: kill_containers(self.engines, self.gateway_pids)

    def _kill_master(self, key: str) -> None:
        if kill_master(self.cluster, key):
            self.result.forced_failovers += 1

    def _kill_gateway(self) -> None:
        """SIGKILL the first gateway's process, then start a gateway on its port again."""
        victim = self.stacks[0]
        port = int(victim.url.rsplit(":", 1)[1])
        for instance in victim.instances:
            os.kill(int(instance.rsplit(":", 1)[1]), signal.SIGKILL)
        victim.stop()  # closes its listening socket: nothing queues there unserved
        self.stacks[0] = self._start_gateway(port)

    async def _anomalies(self) -> int:
        redis = connect_redis(self.cluster.url)
        try:
            found = 0
            for namespace in (LEDGER, FENCED):
                history = await check_namespace_history(redis, NamespaceKeys(TENANT, namespace))
                found += len(history.anomalies)
            return found
        finally:
            await redis.aclose()

    async def _check_acks(self, url: str, headers: dict[str, str]) -> None:
        """Read each acknowledged key back; a missing key or another version is a lost ack,
        booked to the first fault injected after it (or the last, if none came after)."""
        injected = [(row.injected_at, row.name) for row in self.result.rows]
        acks = self.result.recorder.acks
        self.result.acked = len(acks)
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            for ack in acks:
                read = await _read_retrying(client, f"/v1/state/{ack.namespace}/{ack.key}", headers)
                if read.status_code == 200 and int(read.json()["version"]) == ack.version:
                    continue
                if len(self.result.lost_samples) < 3:
                    self.result.lost_samples.append(
                        f"{ack.key} acked v{ack.version} in {ack.phase!r}, read back"
                        f" {read.status_code} {read.text[:120]}"
                    )
                after = [name for at, name in injected if at >= ack.at]
                self.result.lost[after[0] if after else injected[-1][1]] += 1

    def _count_leaks(self) -> None:
        left = containers_of(self.engines, self.gateway_pids)
        self.result.leaked_containers = len(left)
        self.result.leaked_samples = left[:3]
        alive = [pid for pid in self.gateway_pids if Path(f"/proc/{pid}").exists()]
        alive += [p.pid for p in self.cluster.processes.values() if p.poll() is None]
        self.result.leaked_processes = len(alive)


async def _read_retrying(
    client: httpx.AsyncClient, path: str, headers: dict[str, str]
) -> httpx.Response:
    """A read, retried while the gateway cannot answer it yet (after the last fault) or the
    reading agent is over its rate limit."""
    for _ in range(200):
        try:
            read = await client.get(path, headers=headers)
            if read.status_code < 500 and read.status_code != 429:  # 429: the reader's rate
                return read
        except httpx.HTTPError:
            pass
        await anyio.sleep(0.1)
    raise RuntimeError(f"the gateways did not answer GET {path} after the faults")


def _answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


async def wait_until_async(ready: Callable[[], bool], timeout_s: float) -> None:
    """Poll `ready` every 50 ms; TimeoutError past `timeout_s`."""
    with anyio.fail_after(timeout_s):
        while True:
            if ready():
                return
            await anyio.sleep(0.05)


def _codes(failed: Counter[str]) -> str:
    shown = [f"{code} {n}" for code, n in sorted(failed.items()) if code != NO_ANSWER]
    return ", ".join(shown) or "-"


def _table(results: list[ModeResult]) -> Table:
    table = Table("Faults injected while agents commit, lease and call tools", COLUMNS)
    for result in results:
        recorder = result.recorder
        for phase in ["calm"] + [row.name for row in result.rows]:
            log = recorder.log(phase)
            row = next((r for r in result.rows if r.name == phase), None)
            recovery = "-" if row is None else _seconds(row.recovery_s)
            table.rows.append([
                result.mode, phase, log.ok, _codes(log.failed), log.failed[NO_ANSWER],
                log.late, result.lost[phase], row.anomalies if row else 0,
                result.reissued[phase], recovery,
            ])  # fmt: skip
        leaked = f"leaked: {result.leaked_containers} containers, "
        leaked += f"{result.leaked_processes} processes"
        table.rows.append([
            result.mode, f"total ({result.acked} acked commits); {leaked}",
            sum(log.ok for log in recorder.phases.values()),
            _codes(sum((log.failed for log in recorder.phases.values()), Counter())),
            sum(log.failed[NO_ANSWER] for log in recorder.phases.values()),
            sum(log.late for log in recorder.phases.values()),
            sum(result.lost.values()), sum(r.anomalies for r in result.rows),
            sum(result.reissued.values()), "-",
        ])  # fmt: skip
    return table


def _seconds(value: float | None) -> str:
    return "not recovered" if value is None else f"{value:.1f}"


def _goals(results: list[ModeResult]) -> list[Goal]:
    goals: list[Goal] = []
    for result in results:
        if result.mode == "replicated":
            failovers = sum(r.name.startswith(MASTER_KILL) for r in result.rows)
            lost, reissued = sum(result.lost.values()), sum(result.reissued.values())
            anomalies = sum(r.anomalies for r in result.rows)
            goals += [
                Goal(f"replicated: acked commits lost ({failovers} failovers)", "0",
                     str(lost), lost == 0),
                Goal("replicated: fencing tokens reissued", "0", str(reissued), reissued == 0),
                Goal("replicated: history anomalies", "0", str(anomalies), anomalies == 0),
            ]  # fmt: skip
        logs = result.recorder.phases.values()
        unanswered = sum(log.failed[NO_ANSWER] for log in logs)
        late = sum(log.late for log in logs)
        slowest = [r.recovery_s for r in result.rows]
        worst = None if None in slowest else max(s for s in slowest if s is not None)
        leaked = result.leaked_containers + result.leaked_processes
        goals += [
            Goal(f"{result.mode}: failed requests without a SERF answer", "0",
                 str(unanswered), unanswered == 0),
            Goal(f"{result.mode}: requests past deadline + 1 s", "0", str(late), late == 0),
            Goal(f"{result.mode}: slowest recovery after a fault", f"<= {RECOVERY_GOAL_S:.0f} s",
                 _seconds(worst), worst is not None and worst <= RECOVERY_GOAL_S),
            Goal(f"{result.mode}: containers and processes leaked", "0", str(leaked), leaked == 0),
        ]  # fmt: skip
    return goals


def _run_mode(ctx: BenchContext, mode: str, task: TaskID) -> ModeResult:
    """One mode's run on a spare engine of its own."""
    base = ctx.stack.settings
    started = time.monotonic()
    spare = SpareEngine(base.docker_host, base.sandbox.image).start()
    try:
        chaos = ChaosRun(ctx, mode, spare)
        chaos.result.seconds["spare dockerd up"] = time.monotonic() - started
        return chaos.run()
    finally:
        spare.stop()
        ctx.progress.advance(task)


def run(ctx: BenchContext) -> SuiteResult:
    result = SuiteResult("chaos")
    task = ctx.progress.add_task("chaos: faults under load, async and replicated", total=2)
    runs = [_run_mode(ctx, mode, task) for mode in MODES]
    result.tables.append(_table(runs))
    result.goals = _goals(runs)
    for mode_result in runs:
        steps = ", ".join(f"{k} {v:.1f}" for k, v in mode_result.seconds.items())
        result.notes.append(f"{mode_result.mode}: {steps}")
        result.notes += [f"{mode_result.mode} lost: {s}" for s in mode_result.lost_samples]
        result.notes += [f"{mode_result.mode} left: {s}" for s in mode_result.leaked_samples]
        for phase, log in mode_result.recorder.phases.items():
            result.notes += [f"{mode_result.mode}, {phase}: {s}" for s in log.samples]
        if mode_result.forced_failovers:
            result.notes.append(
                f"{mode_result.mode}: {mode_result.forced_failovers} failover(s) had no election"
                " within 15 s and were forced with CLUSTER FAILOVER TAKEOVER"
            )
        result.figures[f"{mode_result.mode} acked commits lost"] = sum(mode_result.lost.values())
        result.figures[f"{mode_result.mode} tokens reissued"] = sum(mode_result.reissued.values())
    result.notes.append(
        "each request has a 2 s deadline; 'no answer' is a failure with no SERF body (a dropped"
        " connection, a client timeout at 5 s, HAProxy's own 502); recovery is from the fault's"
        " injection to the first commit, lease and tool call that succeeded after it; a lost"
        " ack is booked to the first fault injected after it was acknowledged"
    )
    return result
