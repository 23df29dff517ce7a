"""`conclave bench scale`: throughput with 1, 2 and 4 gateway processes on one port.

An `EmbeddedStack(workers=N)` for each count N, all three up at once on the bench's Redis; 32
clients per stack, each with its own token and keep-alive connection (`Http1Connection`, the
gateway bench's client), drive two workloads for a fixed time: commits on dedicated keys (each
client writes only its own key of an optimistic namespace, so nothing conflicts and nothing
retries) and `echo` tool calls. Rounds alternate between the stacks and each row is the median
round, so a change in the machine's other load falls on every count alike. Tools run
in-process (`sandbox_backend=inprocess`), so the figures are the gateway's, not a sandbox's.
Rate limits are set out of reach.

The client shares the machine's 2 cores with the gateways and Redis, so each row says where
the CPU went during the measurement: the client (this process), the gateway processes,
Redis (when it is a child of this process, as the embedded one is) and the whole machine
(`/proc/stat`; other load on the machine is counted too).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import anyio

from conclave.bench.core import (
    BenchContext,
    Call,
    Http1Connection,
    SuiteResult,
    Table,
    cpu_seconds,
    encode_request,
    measuring_settings,
    throughput,
)
from conclave.stack import EmbeddedStack

PROCESS_COUNTS = (1, 2, 4)
CLIENTS = 32
COMMITS = "commits/s, dedicated keys"
CALLS = "tool calls/s, echo"
SATURATED_BUSY = 90.0  # % of the machine's cores: above it, more processes only share them
CORES = os.cpu_count() or 1
START_TIMEOUT_S = 120.0


def _children(named: str) -> set[int]:
    """This process's children whose command line contains `named`."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == os.getpid() and named in command:
            found.add(int(entry.name))
    return found


def _machine_ticks() -> tuple[int, int]:
    """(busy, total) jiffies over all cores since boot."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return sum(values) - idle, sum(values)


@dataclass
class _Usage:
    """CPU used while one workload ran, as % of one core (machine: % of all cores)."""

    client: float
    gateways: float
    redis: float | None
    machine: float

    @property
    def ours(self) -> float:
        """The client, gateways and Redis together (% of one core)."""
        return self.client + self.gateways + (self.redis or 0.0)

    def ms_per_op(self, rate: float) -> float:
        """CPU milliseconds the client, gateways and Redis spent per operation."""
        return 10 * self.ours / rate if rate else 0.0


class _CpuMeter:
    def __init__(self, gateways: set[int], redis: set[int]) -> None:
        self.gateways, self.redis = gateways, redis

    def _sample(self) -> tuple[float, float, float, float, tuple[int, int]]:
        return (
            time.perf_counter(),
            time.process_time(),
            cpu_seconds(self.gateways),
            cpu_seconds(self.redis),
            _machine_ticks(),
        )

    async def measure(self, calls: list[Call], seconds: float) -> tuple[float, _Usage]:
        wall0, client0, gateways0, redis0, (busy0, total0) = self._sample()
        rate = await throughput(calls, seconds)
        wall1, client1, gateways1, redis1, (busy1, total1) = self._sample()
        wall = wall1 - wall0
        usage = _Usage(
            client=100 * (client1 - client0) / wall,
            gateways=100 * (gateways1 - gateways0) / wall,
            redis=100 * (redis1 - redis0) / wall if self.redis else None,
            machine=100 * (busy1 - busy0) / max(1, total1 - total0),
        )
        return rate, usage


def _expect(status: int, answer: bytes) -> None:
    if status != 200:
        raise RuntimeError(f"the gateway refused a bench request: {status} {answer!r}")


def _post(connection: Http1Connection, raw: bytes) -> Call:
    async def call() -> None:
        _expect(*await connection.request(raw))

    return call


class _Clients:
    """CLIENTS clients of one stack, each with its own token, connection and key."""

    def __init__(self, stack: EmbeddedStack) -> None:
        self.stack = stack
        self.connections = [Http1Connection(stack.url) for _ in range(CLIENTS)]
        scopes = ["tool:echo", "state:*:write"]
        self.headers = [
            {"Authorization": "Bearer " + stack.token("bench", f"scale-{i}", scopes)}
            for i in range(CLIENTS)
        ]
        self.workloads: dict[str, list[Call]] = {}

    async def prepare(self, warm_s: float) -> None:
        """Create the namespace, build each workload's requests, and warm both unmeasured."""
        url, namespace = self.stack.url, f"scale-{uuid.uuid4().hex[:8]}"
        create = encode_request(
            "PUT", url, f"/v1/state/{namespace}", self.headers[0],
            json.dumps({"mode": "optimistic"}).encode(),
        )  # fmt: skip
        status, answer = await self.connections[0].request(create)
        if status not in (200, 201):
            raise RuntimeError(f"creating {namespace}: {status} {answer!r}")
        echo = json.dumps({"arguments": {"message": "ping"}}).encode()
        self.workloads[COMMITS] = [
            _post(connection, encode_request(
                "POST", url, f"/v1/state/{namespace}/commit", headers,
                json.dumps({"writes": [{"key": f"client-{i}", "value": i}]}).encode(),
            ))
            for i, connection, headers in zip(
                range(CLIENTS), self.connections, self.headers, strict=True
            )
        ]  # fmt: skip
        self.workloads[CALLS] = [
            _post(connection, encode_request("POST", url, "/v1/tools/echo/call", headers, echo))
            for connection, headers in zip(self.connections, self.headers, strict=True)
        ]
        for calls in self.workloads.values():
            await throughput(calls, warm_s, warm=True)

    async def aclose(self) -> None:
        for connection in self.connections:
            await connection.aclose()


async def _measure(
    targets: dict[int, tuple[EmbeddedStack, _CpuMeter]], rounds: int, seconds: float
) -> dict[tuple[int, str], tuple[float, _Usage]]:
    """Each process count's and workload's calls/s: the median of `rounds` rounds that
    alternate the stacks, so a change in the machine's other load falls on all of them."""
    clients = {n: _Clients(stack) for n, (stack, _) in targets.items()}
    try:
        for each in clients.values():
            await each.prepare(min(1.0, seconds / 2))
        runs: dict[tuple[int, str], list[tuple[float, _Usage]]] = {}
        for _ in range(rounds):
            for n, (_, meter) in targets.items():
                for workload, calls in clients[n].workloads.items():
                    runs.setdefault((n, workload), []).append(await meter.measure(calls, seconds))
        return {
            key: sorted(found, key=lambda run: run[0])[len(found) // 2]
            for key, found in runs.items()
        }
    finally:
        for each in clients.values():
            await each.aclose()


def _saturation(
    workload: str, rates: dict[tuple[int, str], float], usage: dict[tuple[int, str], _Usage]
) -> tuple[list[object], str]:
    """Where the cores ran out for one workload, read off this run's figures: a row of the
    saturation table and the sentence that explains it."""
    gains = [round(rates[(n, workload)] / rates[(1, workload)], 2) for n in PROCESS_COUNTS[1:]]
    cost = min(usage[(n, workload)].ms_per_op(rates[(n, workload)]) for n in PROCESS_COUNTS)
    ceiling = CORES * 1000 / cost
    full = next((n for n in PROCESS_COUNTS if usage[(n, workload)].machine >= SATURATED_BUSY), None)
    if full is None:
        busiest = max(usage[(n, workload)].machine for n in PROCESS_COUNTS)
        where = f"the machine never passed {busiest:.0f}% busy"
    else:
        used = usage[(full, workload)]
        where = (
            f"the {CORES} cores are saturated from {full} process{'es' * (full > 1)} on "
            f"({used.machine:.0f}% busy, {used.ours / CORES:.0f}% of them this run's client, "
            "gateways and Redis, the rest other load): further processes only share them"
        )
    sentence = (
        f"{workload}: {' and '.join(f'{g:.2f}x' for g in gains)} the 1-process rate with "
        f"{' and '.join(map(str, PROCESS_COUNTS[1:]))} processes; at {cost:.2f} ms of CPU per "
        f"operation (client, gateways and Redis together) {CORES} cores carry at most "
        f"~{ceiling:.0f}/s; {where}"
    )
    row: list[object] = [workload, *gains, round(cost, 3), round(ceiling), full or "-"]
    return row, sentence


def run(ctx: BenchContext) -> SuiteResult:
    rounds, seconds = (1, 1.5) if ctx.quick else (5, 3.0)
    table = Table(
        f"scale: gateway processes on one port, {CLIENTS} clients (keep-alive HTTP/1.1); "
        "CPU in % of one core",
        ["processes", "workload", "per s", "vs 1 process", "client CPU", "gateways CPU",
         "redis CPU", "CPU ms per op", f"machine busy (% of {CORES} cores)"],
    )  # fmt: skip
    saturation = Table(
        f"scale: where the {CORES} cores saturate",
        ["workload", *(f"{n} vs 1 process" for n in PROCESS_COUNTS[1:]), "CPU ms per op (least)",
         f"{CORES}-core ceiling /s", f"machine >= {SATURATED_BUSY:.0f}% busy from (processes)"],
    )  # fmt: skip
    result = SuiteResult("scale", tables=[table, saturation])
    rates: dict[tuple[int, str], float] = {}
    usage: dict[tuple[int, str], _Usage] = {}
    redis = _children("redis-server")
    task = ctx.progress.add_task("scale: 1, 2 and 4 gateway processes", total=len(PROCESS_COUNTS))
    targets: dict[int, tuple[EmbeddedStack, _CpuMeter]] = {}
    with ExitStack() as stacks:
        for processes in PROCESS_COUNTS:  # all up at once: the rounds alternate between them
            settings = measuring_settings(ctx.stack.settings, workers=processes)
            before = _children("conclave.stack.gateway_process")
            log = ctx.gateway_log(f"scale-{processes}")
            # A 4-process start on a busy 2-core machine may take longer than the usual 30 s.
            stack = EmbeddedStack(settings, log_path=log).start(timeout_s=START_TIMEOUT_S)
            stacks.callback(stack.stop)
            gateways = _children("conclave.stack.gateway_process") - before
            targets[processes] = (stack, _CpuMeter(gateways, redis))
            ctx.progress.advance(task)
        measured = anyio.run(
            _measure, targets, rounds, seconds, backend_options={"use_uvloop": True}
        )
    for (processes, workload), (rate, used) in measured.items():
        rates[(processes, workload)], usage[(processes, workload)] = rate, used
        result.figures[f"{processes} processes {workload}"] = rate
    for processes in PROCESS_COUNTS:
        for workload in (COMMITS, CALLS):
            rate, used = rates[(processes, workload)], usage[(processes, workload)]
            table.rows.append([
                processes, workload, round(rate), round(rate / rates[(1, workload)], 2),
                round(used.client), round(used.gateways),
                "-" if used.redis is None else round(used.redis),
                round(used.ms_per_op(rate), 3), round(used.machine),
            ])  # fmt: skip
    result.series["scale"] = {
        f"{n} {w}": {"rate": rates[(n, w)], **vars(usage[(n, w)])} for n, w in rates
    }
    client_max = max(used.client for used in usage.values())
    for workload in (COMMITS, CALLS):
        row, sentence = _saturation(workload, rates, usage)
        saturation.rows.append(row)
        result.notes.append(sentence)
    result.notes.append(
        "one client process (uvloop, prepared keep-alive requests) drives every row and used at "
        f"most {client_max:.0f}% of one core, so the gateways, not the client, set the rate. "
        "Tools run in-process; the Redis is the bench's, shared by every process count"
        + ("" if redis else " (not a child of the bench: its CPU is not shown)")
    )
    return result
