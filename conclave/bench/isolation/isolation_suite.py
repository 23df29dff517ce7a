"""`conclave bench isolation`: does a noisy tenant, or a stranger, move a victim tenant's service?

A victim tenant calls `echo` (sandboxed, with a time budget) as an agent in service does, at a
steady pace well within its limits (`VICTIM_RATE_PER_S`), first alone, then while a noisy
tenant (or an unauthenticated stranger), on the same gateway, Redis and sandbox backend, runs
one attack of issue 26 (`isolation_attacks`, beside it): floods tool calls, holds slow
sandboxes, commits huge read sets, forges results, fills Redis through state, floods huge
plans, fills its workspace, floods the egress proxy with connections (the gateway's
descriptors), floods connections without a token, floods the audit with unauthenticated
refusals, forges runner replies past the output cap, or calls an `mcp_http` upstream that
answers without end (`conclave.bench.isolation.hostile_upstream`).

The attacker runs in its own process, as a real client would. Every call, the victim's and
the attacker's, is made once: no retries, so a refusal the victim gets is counted, not hidden.
Reported per attack: the victim's success rate and the SERF codes of its failures, p50 and
p99; its p99 against the same run's control row's (the goal: at most 1.5x, judging Conclave
and not the machine's own noise), its p50 against its p50 alone (at most 1.5x), and the
older p99 against its p99 alone beside them, held to no goal;
whether the attacker was refused with the SERF error that defends against it; whether an
operator could revoke one of the noisy tenant's agents while the attack ran (the revocation
answered and the agent's token then refused AUTH_REVOKED); and what was left once the attack
ended and its idle sandboxes were reaped: the gateway's descriptors and processes (sandboxes
included) past what it held before, and the bytes in its sandboxes' workspaces. One more row
runs `run_python` as the noisy tenant looking for the gateway's secret and admin key
everywhere a tool can read and counts what it found.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import anyio
import httpx
import redis

from agents import GatewayCallError, GatewayClient
from conclave.bench.core import BenchContext, Goal, SuiteResult, Table, cpu_seconds, percentile
from conclave.bench.isolation.hostile_upstream import running_hostile_upstream
from conclave.bench.isolation.isolation_attacks import (
    ATTACKS,
    HUGE_TOOL,
    AttackRun,
    Target,
    new_client,
)
from conclave.stack import EmbeddedStack
from protocol import ADMIN_KEY_HEADER, Budget, ErrorCode
from sandbox import DEFAULT_WORKSPACE_ROOT

TOOL_MODULES = (
    "tools.builtin",
    "tools.harness.misbehaving",
    "tools.harness.hostile",
    "tools.harness.egress",
)
VICTIM_BUDGET_MS = 5_000
# The victim's pace: one call every 20 ms, a busy agent in service. That is half the suite's
# tenant rate (100/s) and a quarter of an agent's (200/s), so its own limits never refuse it,
# and 300 calls in a quick row's 6 s, so its p99 is the 4th slowest call, not the slowest.
VICTIM_RATE_PER_S = 50.0
GOAL_P99_VS_CONTROL = 1.5  # victim p99 / the same run's control row's p99
GOAL_P50_VS_ALONE = 1.5  # victim p50 / its p50 alone
# No attack: one process outside Conclave keeps one core busy (at the default priority)
# while the victim calls: what any load of the shared cores does to its p99 on this machine,
# the floor no defence of the gateway's can go below. No goal of its own: every attack's p99
# is judged against it.
CONTROL = "control: one core busy outside Conclave"
SCENARIOS = ("alone", CONTROL, *ATTACKS)  # the table's rows, in order
IDLE_S = 2.0  # the suite's sandbox idle time: an attack's sandboxes are reaped soon after
KEEP_WARM_S = 0.5  # between measured windows the victim calls this often: never idle IDLE_S
LEFTOVERS_WITHIN_S = 15.0
BUILD_UP_S = 2.0  # the attacker's agents register and its attack builds up


@dataclass
class VictimCalls:
    """The victim's calls in one row: each one's latency (ms), its failures by SERF code, and
    the first message of each code (what the victim was told)."""

    latencies: list[float] = field(default_factory=list)
    failures: Counter[str] = field(default_factory=Counter)
    messages: dict[str, str] = field(default_factory=dict)


@dataclass
class Row:
    victim: VictimCalls
    seen: Counter[str]
    revoked: bool | None = None
    leftovers: tuple[int, int, int] = (0, 0, 0)  # descriptors, processes, bytes
    # Cores the attacker's own process and the gateway's used while the victim was measured:
    # the attacker's client shares the machine's cores with the gateway.
    cores: tuple[float, float] = (0.0, 0.0)


@dataclass
class Victim:
    """The victim tenant's agent: in service the whole run, so its sandbox stays warm."""

    client: GatewayClient
    lock: anyio.Lock = field(default_factory=anyio.Lock)  # one call at a time, one sandbox

    async def keep_warm(self) -> None:
        """Between measured windows (an attacker setting up, leftovers being counted) the
        agent goes on at a slow pace, so its sandbox is never reaped as idle and no row
        starts with its cold start; run it in the suite's task group, cancelled at the end."""
        while True:
            async with self.lock:
                with contextlib.suppress(GatewayCallError):
                    await self.client.call_tool("echo", {"message": "warm"})
            await anyio.sleep(KEEP_WARM_S)


async def _victim_calls(victim: Victim, seconds: float) -> VictimCalls:
    """Echo calls at `VICTIM_RATE_PER_S` for `seconds`, each once its predecessor answered (an
    agent waits for its tool's answer). A call late to its slot starts at once, and the pace
    resumes from there (no burst to catch up)."""
    calls = VictimCalls()
    interval = 1.0 / VICTIM_RATE_PER_S
    async with victim.lock:
        stop = time.monotonic() + seconds
        due = time.monotonic()
        while due < stop:
            await anyio.sleep(max(0.0, due - time.monotonic()))
            budget = Budget(deadline_ms=int(time.time() * 1000) + VICTIM_BUDGET_MS)
            began = time.perf_counter()
            try:
                await victim.client.call_tool("echo", {"message": "ping"}, budget=budget)
            except GatewayCallError as exc:
                calls.failures[exc.code.value] += 1
                calls.messages.setdefault(exc.code.value, exc.serf.message[:200])
            calls.latencies.append((time.perf_counter() - began) * 1000)
            due = max(due + interval, time.monotonic())
    return calls


def _attack_process(name: str, target: Target, duration_s: float, report: Connection) -> None:
    """The attacker's own process (its own event loop and CPU time, as a real client would
    have): sets up, says so, attacks for `duration_s`, then reports what it was answered.

    It runs at the lowest priority: a real attacker's client runs on its own machine, and
    here its CPU (JSON, TLS-less HTTP, a thousand sockets) would otherwise be taken from the
    same two cores the gateway and the victim use; what the suite measures is what the
    gateway lets the attack cost the victim. It still gets every core left idle."""
    _lowest_priority()
    attack, _ = ATTACKS[name]
    run = AttackRun(target, duration_s, on_start=lambda: report.send("started"))
    try:
        anyio.run(attack, run)
    except Exception as exc:  # a crashed attack is reported, not hidden
        run.seen[f"attack failed: {type(exc).__name__}: {exc}"[:120]] += 1
    run.start()  # never set up: the suite is not left waiting
    report.send(dict(run.seen))


def _lowest_priority() -> None:
    """This process at nice 19 against every other process on the machine. With autogroup
    scheduling (Linux's default) nice only orders the processes of one session, and the
    session's group weighs as much as the gateway's: the process leads a session of its own
    and sets that group's nice too (`/proc/self/autogroup`, absent when autogroup is off)."""
    os.setsid()
    with contextlib.suppress(OSError):
        Path("/proc/self/autogroup").write_text("19")
    os.nice(19)


def _busy_core(seconds: float) -> None:
    """The control row's load: spin one core for `seconds`, nothing else."""
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        pass


async def _run_control(victim: Victim, seconds: float) -> Row:
    burner = multiprocessing.get_context("spawn").Process(
        target=_busy_core, args=(BUILD_UP_S + seconds + 1.0,)
    )
    burner.start()
    try:
        await _victim_calls(victim, BUILD_UP_S)  # the burner is spinning; not measured
        cpu_before, began = cpu_seconds([burner.pid or 0]), time.monotonic()
        calls = await _victim_calls(victim, seconds)
        burned = (cpu_seconds([burner.pid or 0]) - cpu_before) / (time.monotonic() - began)
    finally:
        await anyio.to_thread.run_sync(burner.join)
    return Row(calls, Counter(), cores=(burned, 0.0))


def _gateway_pids(stack: EmbeddedStack) -> list[int]:
    return [int(instance.rsplit(":", 1)[1]) for instance in stack.instances]


def _descendants(pids: list[int]) -> int:
    """How many processes descend from `pids` (bwrap's sandboxes, stdio servers...)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat[1])
    found, frontier = 0, set(pids)
    while frontier:
        children = {pid for pid, parent in parents.items() if parent in frontier}
        found += len(children)
        frontier = children
    return found


def _containers(stack: EmbeddedStack, pids: list[int]) -> int:
    if stack.settings.sandbox.backend != "docker":
        return 0
    import docker  # only where the docker backend runs

    client = docker.DockerClient(base_url=stack.settings.docker_host)
    try:
        # The engine's own list, no inspection of each (one removed meanwhile would fail it).
        return sum(
            len(client.api.containers(filters={"label": f"conclave.owner_pid={pid}"}))
            for pid in pids
        )
    finally:
        client.close()


def _workspace_bytes(pids: list[int]) -> int:
    """Bytes held in the workspaces of the gateway's sandboxes."""
    total = 0
    for owner in DEFAULT_WORKSPACE_ROOT.glob("*.owner"):
        try:
            if int(owner.read_text()) not in pids:
                continue
            seen = os.statvfs(owner.with_suffix(""))
        except (OSError, ValueError):
            continue
        total += (seen.f_blocks - seen.f_bfree) * seen.f_frsize
    return total


def _redis_connections(stack: EmbeddedStack) -> int:
    """Connections Redis serves (the gateway's pool, which keeps what a burst opened)."""
    with redis.Redis.from_url(stack.settings.redis_url or "") as client:
        return int(client.info("clients")["connected_clients"]) - 1  # less this one


def _holdings(stack: EmbeddedStack) -> tuple[int, int, int]:
    """What the gateway holds now: descriptors (less its Redis pool's, which a burst of
    concurrent requests grows up to the pool's bound and which stays open for reuse),
    processes (with containers), bytes."""
    pids = _gateway_pids(stack)
    fds = sum(len(os.listdir(f"/proc/{pid}/fd")) for pid in pids) - _redis_connections(stack)
    return fds, _descendants(pids) + _containers(stack, pids), _workspace_bytes(pids)


async def _leftovers(stack: EmbeddedStack, before: tuple[int, int, int]) -> tuple[int, int, int]:
    """What the gateway still holds past `before`, once idle sandboxes had time to go."""
    stop = time.monotonic() + LEFTOVERS_WITHIN_S
    while True:
        now = await anyio.to_thread.run_sync(_holdings, stack)
        left = (max(0, now[0] - before[0]), max(0, now[1] - before[1]), max(0, now[2] - before[2]))
        if left == (0, 0, 0) or time.monotonic() > stop:
            return left
        await anyio.sleep(0.5)


async def _revoke_works(target: Target, revokee: str, token: str) -> bool:
    """The operator revokes one of the noisy tenant's agents; its token is then refused."""
    headers = {ADMIN_KEY_HEADER: target.admin_key}
    async with httpx.AsyncClient(base_url=target.url, timeout=10) as http:
        try:
            answer = await http.delete(f"/v1/agents/noisy/{revokee}", headers=headers)
        except httpx.HTTPError:
            return False
    if answer.status_code != 200:
        return False
    async with GatewayClient(target.url, token) as revoked:
        try:
            await revoked.call_tool("echo", {"message": "after revoke"})
        except GatewayCallError as exc:
            return exc.code is ErrorCode.AUTH_REVOKED
    return False


async def _run_attack(
    name: str, stack: EmbeddedStack, target: Target, victim: Victim, seconds: float
) -> Row:
    revokee = f"revokee-{time.monotonic_ns()}"
    token = (await new_client(target, "noisy", ["echo"], agent=revokee)).token or ""
    before = await anyio.to_thread.run_sync(_holdings, stack)
    receive, send = multiprocessing.Pipe(duplex=False)
    attacker = multiprocessing.get_context("spawn").Process(
        target=_attack_process, args=(name, target, BUILD_UP_S + seconds + 2.0, send)
    )
    attacker.start()

    def reported(wait_s: float) -> Any:
        return receive.recv() if receive.poll(wait_s) else {"no report": 1}

    await anyio.to_thread.run_sync(reported, 120.0)  # "started": its agents are registered
    await _victim_calls(victim, BUILD_UP_S)  # the attack builds up; not measured
    watched = [attacker.pid or 0], _gateway_pids(stack)
    cpu_before, began = [cpu_seconds(pids) for pids in watched], time.monotonic()
    calls = await _victim_calls(victim, seconds)
    elapsed = time.monotonic() - began
    attacker_cpu, gateway_cpu = (
        cpu_seconds(p) - b for p, b in zip(watched, cpu_before, strict=True)
    )
    revoked = await _revoke_works(target, revokee, token)  # the attack still runs
    seen: dict[str, int] = await anyio.to_thread.run_sync(reported, seconds + 120.0)
    await anyio.to_thread.run_sync(attacker.join)
    row = Row(calls, Counter(seen), revoked, cores=(attacker_cpu / elapsed, gateway_cpu / elapsed))
    row.leftovers = await _leftovers(stack, before)
    return row


# Run by the noisy tenant's `run_python`: every place a tool could find a gateway secret.
_SNOOP = r"""
import glob, os
seen = [repr(dict(os.environ))]
for path in glob.glob('/proc/*/environ') + glob.glob('/proc/*/cmdline'):
    try:
        seen.append(open(path, 'rb').read().decode(errors='replace'))
    except OSError:
        pass
for root in (os.environ.get('HOME', '/root'), '/root', '/run', '/tmp', '/workspace'):
    for path in glob.glob(root + '/**/*', recursive=True)[:2000]:
        try:
            seen.append(open(path, 'rb').read(4096).decode(errors='replace'))
        except OSError:
            pass
'\n'.join(seen)[:800_000]
"""


async def _secrets_found(target: Target, stack: EmbeddedStack) -> int:
    snoop = await new_client(target, "noisy", ["run_python"])
    async with snoop:
        answer = await snoop.call_tool("run_python", {"code": _SNOOP})
    text = str(answer.result)
    secrets = (stack.settings.secret, stack.settings.admin_key)
    return sum(1 for s in secrets if s is not None and s.get_secret_value() in text)


async def _warm_pools(target: Target) -> None:
    """A burst of new agents' calls, so the gateway's connection pools (Redis, the Docker
    engine's) have grown to their bound, as in a gateway in service, before leftovers are
    counted; their sandboxes are reaped before the first attack."""

    async def one_call() -> None:
        async with await new_client(target, "warmup", ["echo"]) as client:
            with contextlib.suppress(GatewayCallError):
                await client.call_tool("echo", {"message": "warm"})

    async with anyio.create_task_group() as group:
        for _ in range(target.pool_max + 16):
            group.start_soon(one_call)


async def _measure(stack: EmbeddedStack, seconds: float) -> dict[str, Any]:
    admin_key = stack.admin_headers[ADMIN_KEY_HEADER]
    target = Target(stack.url, admin_key, stack.settings.sandbox.pool_max)
    rows: dict[str, Row] = {}
    await _warm_pools(target)
    await anyio.sleep(IDLE_S + 4.0)  # the burst's sandboxes are reaped before anyone measures
    async with (
        await new_client(target, "victim", ["echo"]) as client,
        anyio.create_task_group() as group,
    ):
        victim = Victim(client)
        group.start_soon(victim.keep_warm)
        await _victim_calls(victim, 1.0)  # its sandbox starts warm, as a running agent's is
        gateway, began = _gateway_pids(stack), time.monotonic()
        cpu_before = cpu_seconds(gateway)
        alone = Row(await _victim_calls(victim, seconds), Counter())
        alone.cores = (0.0, (cpu_seconds(gateway) - cpu_before) / (time.monotonic() - began))
        rows["alone"] = alone
        rows[CONTROL] = await _run_control(victim, seconds)
        for name in ATTACKS:
            rows[name] = await _run_attack(name, stack, target, victim, seconds)
        group.cancel_scope.cancel()
    return {"rows": rows, "secrets": await _secrets_found(target, stack)}


def _yes(flag: bool | None) -> str:
    return "-" if flag is None else ("yes" if flag else "NO")


@dataclass(frozen=True)
class IsolationOptions:
    """How long each row measures the victim (None: 6 s quick, 15 s full). A shorter row
    checks that every attack runs and is refused (the suite's own test), not its figures."""

    row_s: float | None = None

    def sample_note(self) -> str | None:
        return None if self.row_s is None else f"rows of {self.row_s:g} s"


def run(ctx: BenchContext) -> SuiteResult:
    seconds = ctx.options_of("isolation", IsolationOptions).row_s or (6.0 if ctx.quick else 15.0)
    answer_mb = 64 if ctx.quick else 300
    base = ctx.stack.settings
    task = ctx.progress.add_task("isolation: a victim tenant beside a noisy one", total=1)
    with running_hostile_upstream(answer_mb) as upstream:
        config = ctx.out_dir / "isolation-conclave.toml"
        config.write_text(
            f'[[source]]\nname = "{HUGE_TOOL.split("__")[0]}"\nkind = "mcp_http"\n'
            f'url = "{upstream}"\n'
        )
        settings = base.model_copy(
            update={
                "port": 0,
                "tool_modules": TOOL_MODULES,
                "config": config,
                "sandbox_idle_s": IDLE_S,
                # A flood of calls meets the tenant's rate before the victim's service moves.
                "tenant_rate_limit_per_s": 100.0,
                "tenant_rate_limit_burst": 100,
            }
        )
        with EmbeddedStack(settings, log_path=ctx.gateway_log("isolation")) as stack:
            measured = anyio.run(_measure, stack, seconds)
    ctx.progress.advance(task)
    backend = ctx.stack.backend.name if ctx.stack.backend else "?"
    return report(measured["rows"], measured["secrets"], seconds, backend)


def report(rows: dict[str, Row], secrets: int, seconds: float, backend: str) -> SuiteResult:
    """The suite's table, figures and goals from its measured rows (`SCENARIOS`' names)."""

    table = Table(
        "isolation: the victim tenant's echo calls (ms), alone and beside an attacker",
        [
            "attack", "calls", "succeeded", "victim failed (SERF)", "p50", "p99",
            "p99 / control p99", "p50 / alone p50", "alone p99", "p99 / alone",
            "CPU: attacker / gateway", "attacker refused (SERF)", "revoke works",
            "left: fds/procs/bytes",
        ],
    )  # fmt: skip
    result = SuiteResult("isolation", tables=[table])
    alone_p50 = statistics.median(rows["alone"].victim.latencies)
    alone_p99 = percentile(rows["alone"].victim.latencies, 0.99)
    control_p99 = percentile(rows[CONTROL].victim.latencies, 0.99)
    told: dict[str, str] = {}  # what the victim was told, per code, over all rows
    for name, row in rows.items():
        latencies, failures = row.victim.latencies, row.victim.failures
        calls = len(latencies)
        success = (calls - failures.total()) / calls if calls else 0.0
        failed = ", ".join(f"{c} x{n}" for c, n in failures.most_common()) or "-"
        told |= {c: f"{c} ({name}): {m}" for c, m in row.victim.messages.items() if c not in told}
        p50, p99 = statistics.median(latencies), percentile(latencies, 0.99)
        ratio = p99 / alone_p99
        vs_control, p50_vs_alone = p99 / control_p99, p50 / alone_p50
        refused: bool | None = None
        left = "-"
        if name not in ("alone", CONTROL):
            expected = ATTACKS[name][1]
            refused = any(row.seen[code] for code in expected)
            refusals = Counter({c: n for c, n in row.seen.items() if c != "ok"})
            codes = ", ".join(f"{c} x{n}" for c, n in refusals.most_common(2))
            left = "/".join(str(n) for n in row.leftovers)
        table.rows.append(
            [
                name, calls, f"{success:.1%}", failed, p50, p99, f"{vs_control:.2f}x",
                f"{p50_vs_alone:.2f}x", alone_p99, f"{ratio:.2f}x",
                f"{row.cores[0]:.2f} / {row.cores[1]:.2f}",
                "-" if refused is None else f"{_yes(refused)} ({codes or 'none'})",
                _yes(row.revoked), left,
            ]
        )  # fmt: skip
        result.figures[f"{name} success"] = success
        result.figures[f"{name} p99_ratio"] = ratio
        result.figures[f"{name} p99_vs_control"] = vs_control
        result.figures[f"{name} p50_vs_alone"] = p50_vs_alone
        result.figures[f"{name} attacker_cores"], result.figures[f"{name} gateway_cores"] = (
            row.cores
        )
        if name == CONTROL:
            continue  # no attack: printed beside the others, held to no goal
        result.goals.append(
            Goal(f"{name}: victim calls succeeded", "100%", f"{success:.1%}", success == 1.0)
        )
        if name == "alone":
            continue
        result.goals += [
            Goal(f"{name}: victim p99 / control p99", f"<= {GOAL_P99_VS_CONTROL:.1f}x",
                 f"{vs_control:.2f}x", vs_control <= GOAL_P99_VS_CONTROL),
            Goal(f"{name}: victim p50 / alone p50", f"<= {GOAL_P50_VS_ALONE:.1f}x",
                 f"{p50_vs_alone:.2f}x", p50_vs_alone <= GOAL_P50_VS_ALONE),
            Goal(f"{name}: attacker refused with SERF", "yes", _yes(refused), bool(refused)),
            Goal(f"{name}: operator revokes", "yes", _yes(row.revoked), bool(row.revoked)),
            Goal(f"{name}: left after (fds/procs/bytes)", "0/0/0", left,
                 row.leftovers == (0, 0, 0)),
        ]  # fmt: skip
    found = secrets
    result.figures["gateway secrets readable by a tool"] = found
    result.goals.append(
        Goal(f"gateway secrets readable by a tool ({backend})", "0", str(found), found == 0)
    )
    result.notes.append(
        f"the victim calls at {VICTIM_RATE_PER_S:.0f}/s, each call once the previous one "
        f"answered (a {seconds:.0f} s row: about {VICTIM_RATE_PER_S * seconds:.0f} calls); "
        "no call is retried, the victim's nor the attacker's; between rows the victim calls "
        f"every {KEEP_WARM_S} s, so its sandbox stays warm, as a running agent's would, and "
        "the gateway's connection pools are "
        "warmed by a burst of calls first; the suite's tenant rate limit "
        "is 100/s (burst 100) and idle sandboxes go after 2 s, so an attack's are reaped "
        "before its leftovers are counted; descriptors are the gateway's less its Redis "
        "pool's (kept open for reuse, up to the pool's bound); bytes are those in the "
        "sandboxes' workspaces "
        "(Redis bytes are the tenants' quotas', not counted here)"
    )
    result.notes.append(
        f"{CONTROL!r} is no attack: a process that only spins keeps one core busy while the "
        "victim calls, the floor any load of this machine's cores puts under the victim's "
        "p99, whatever the gateway does; the attacker's own process runs at nice 19 (a real "
        "attacker's client has a machine of its own), taking only cores left idle"
    )
    result.notes.append(
        "goals: each attack's victim p99 against the control row's p99 of the same run (what "
        "Conclave adds to the machine's own noise) and its p50 against its p50 alone; its "
        "p99 against its p99 alone is printed beside them, held to no goal (the control row "
        "alone moves it by 1.6x to 2.9x on a loaded 2-core machine)"
    )
    result.notes.append(
        "CPU: the cores (1.00: one core busy) the attacker's own process and the gateway's "
        f"used while the victim was measured, of the machine's {os.cpu_count()}; an attacker "
        "that takes the cores with its own client slows every process on the machine"
    )
    result.notes += [f"the victim was told {message}" for message in told.values()]
    return result
