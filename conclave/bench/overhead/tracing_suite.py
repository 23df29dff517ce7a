"""`conclave bench tracing`: what OpenTelemetry tracing costs the gateway, on and off.

Five gateways in their own processes, all running `echo` in-process (so the figure is the
gateway's own work: HTTP, six stages, Redis): tracing off (the SDK installed, no `OTEL_*`
exporter configured); on, every request traced; on, one request in 10 and one in 100 traced
(the standard `parentbased_traceidratio` sampler); and a second gateway with tracing off,
whose difference from the first is the noise floor of the comparison. The traced ones export every
span over OTLP/HTTP (the gateway's own batching and protobuf writer, `gateway.telemetry.otlp_wire`)
to a receiver in the bench process. Calls/s at concurrency 16 are measured in alternated rounds
(each gateway in turn) and compared by their medians, so a drift of the machine hits all alike. Each
round also reads the gateway process's CPU time (/proc): CPU per call is far steadier than calls/s
on a shared machine, where the two off gateways' calls/s can differ by tens of percent.

Tracing off runs no OpenTelemetry code: each instrumented place reads one boolean
(`gateway.telemetry.tracing.TRACING.on`), six times per REST call. A gateway without those reads
would have to be another build, so the off row times exactly those reads and sets them against a
call's time at the off rate, rather than comparing two noisy calls/s figures.
"""

from __future__ import annotations

import json
import os
import statistics
import time
import timeit
import uuid
from collections.abc import Iterator
from contextlib import AsyncExitStack, ExitStack, contextmanager

import anyio

from conclave.bench.core import (
    BenchContext,
    Call,
    Goal,
    Http1Connection,
    SuiteResult,
    Table,
    children,
    cpu_seconds,
    encode_request,
    measuring_settings,
    throughput,
)
from conclave.bench.overhead.otlp_receiver import OtlpReceiver
from conclave.stack import EmbeddedStack

GOAL_ON_COST, GOAL_OFF_COST = 0.10, 0.01
WORKERS = 16
SAMPLED_RATIOS = (0.1, 0.01)  # OTEL_TRACES_SAMPLER_ARG of the sampled rows
OFF = "tracing off (SDK installed, no exporter)"
OFF_AGAIN = "tracing off, a second gateway (the noise floor)"
GUARDS_PER_CALL = 6  # app, request context, pipeline, dispatch, two Redis scripts
# Every span reaches the receiver: a queue that drops spans under load would flatter "on".
_ON_ENV = {
    "OTEL_TRACES_EXPORTER": "otlp",
    "OTEL_SERVICE_NAME": "conclave-bench",
    "OTEL_BSP_MAX_QUEUE_SIZE": "65536",
    "OTEL_BSP_SCHEDULE_DELAY": "200",
}


@contextmanager
def _otel_environment(values: dict[str, str]) -> Iterator[None]:
    """The process's `OTEL_*` variables replaced by `values` (a gateway started now
    inherits them), restored afterwards."""
    saved = {k: v for k, v in os.environ.items() if k.startswith("OTEL_")}
    for name in saved:
        del os.environ[name]
    os.environ.update(values)
    try:
        yield
    finally:
        for name in values:
            os.environ.pop(name, None)
        os.environ.update(saved)


def _rest_calls(stack: EmbeddedStack, connections: list[Http1Connection]) -> list[Call]:
    """One `echo` call function per worker, each with its own identity and connection."""
    body = json.dumps({"arguments": {"message": "ping"}}).encode()
    calls: list[Call] = []
    for connection in connections:
        token = stack.token("bench", f"t-{uuid.uuid4().hex[:8]}", ["tool:echo"])
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        raw = encode_request("POST", stack.url, "/v1/tools/echo/call", headers, body)

        async def call(connection: Http1Connection = connection, raw: bytes = raw) -> None:
            status, answer = await connection.request(raw)
            if status != 200:
                raise RuntimeError(f"the gateway refused a bench call: {answer!r}")

        calls.append(call)
    return calls


async def _alternated(
    stacks: dict[str, EmbeddedStack], pids: dict[str, set[int]], rounds: int, seconds: float
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Calls/s and gateway CPU us per call of each gateway, measured in turn, `rounds` times."""
    async with AsyncExitStack() as exits:
        workers = {}
        for label, stack in stacks.items():
            connections = [Http1Connection(stack.url) for _ in range(WORKERS)]
            for connection in connections:
                exits.push_async_callback(connection.aclose)
            workers[label] = _rest_calls(stack, connections)
        for calls in workers.values():  # warm: connections, token caches, scripts
            await throughput(calls, 0.5, warm=True)
        rates: dict[str, list[float]] = {label: [] for label in stacks}
        cpu: dict[str, list[float]] = {label: [] for label in stacks}
        for _ in range(rounds):
            for label, calls in workers.items():
                used, began = cpu_seconds(pids[label]), time.perf_counter()
                rate = await throughput(calls, seconds)
                elapsed = time.perf_counter() - began
                rates[label].append(rate)
                cpu[label].append((cpu_seconds(pids[label]) - used) / (rate * elapsed) * 1e6)
    return rates, cpu


def _guard_seconds() -> float:
    """What the reads of `TRACING.on` a REST call makes cost, per call (best of 5)."""
    setup = "from gateway.telemetry.tracing import TRACING"
    reads = "\n".join(["if TRACING.on: pass"] * GUARDS_PER_CALL)
    number = 200_000
    return min(timeit.repeat(reads, setup, number=number, repeat=5)) / number


def run(ctx: BenchContext) -> SuiteResult:
    rounds = 3 if ctx.quick else 7
    seconds = 1.5 if ctx.quick else 4.0
    settings = measuring_settings(ctx.stack.settings)
    task = ctx.progress.add_task("tracing: calls/s with tracing off vs on", total=1)
    with OtlpReceiver() as receiver, ExitStack() as running:
        stacks: dict[str, EmbeddedStack] = {}
        pids: dict[str, set[int]] = {}
        for label, env in _configurations(receiver.endpoint).items():
            with _otel_environment(env):
                log = ctx.gateway_log(f"tracing-{label.split()[0]}-{len(stacks)}")
                before = children()
                stacks[label] = running.enter_context(EmbeddedStack(settings, log_path=log))
                pids[label] = children() - before
        rates, cpu = anyio.run(
            _alternated, stacks, pids, rounds, seconds, backend_options={"use_uvloop": True}
        )
        running.close()  # the gateways flush the spans still batched as they stop
        exported = len(receiver.spans)
    ctx.progress.advance(task)

    medians = {label: statistics.median(values) for label, values in rates.items()}
    off_rate = medians[OFF]
    cpu_medians = {label: statistics.median(values) for label, values in cpu.items()}
    table = Table(
        f"tracing: echo over REST, calls/s at concurrency {WORKERS} (median of {rounds}"
        " alternated rounds)",
        ["gateway", "calls/s", "rounds", "vs off", "gateway CPU us/call", "CPU vs off"],
    )
    result = SuiteResult("tracing", tables=[table])
    for label, rate in medians.items():
        cost = 1 - rate / off_rate
        shown = "-" if label == OFF else f"{-cost:+.1%}"
        cpu_cost = cpu_medians[label] / cpu_medians[OFF] - 1
        cpu_shown = "-" if label == OFF else f"{cpu_cost:+.1%}"
        table.rows.append(
            [label, round(rate), _shown(rates[label]), shown, round(cpu_medians[label]), cpu_shown]
        )
        result.figures[f"{label} calls_per_s"] = rate
        result.figures[f"{label} cpu_us_per_call"] = cpu_medians[label]
        if label == OFF_AGAIN:
            result.figures["noise floor"] = cost
        elif label != OFF:
            result.figures[f"{label} cost"] = cost
            result.goals.append(
                Goal(f"{label}: calls/s lost vs off", f"<= {GOAL_ON_COST:.0%}", f"{cost:.1%}",
                     cost <= GOAL_ON_COST)
            )  # fmt: skip
    guard_s = _guard_seconds()
    off_cost = guard_s * off_rate  # the guards' share of one call's time at the off rate
    result.figures["off guard_ns_per_call"] = guard_s * 1e9
    result.figures["off cost"] = off_cost
    result.figures["spans exported"] = exported
    result.series["rates"] = rates
    result.series["cpu_us_per_call"] = cpu
    result.goals.append(
        Goal(f"tracing off: its {GUARDS_PER_CALL} guard reads per call (timed: {guard_s * 1e9:.0f}"
             " ns) vs a call's time at the off rate", f"<= {GOAL_OFF_COST:.0%}",
             f"{off_cost:.3%}", off_cost <= GOAL_OFF_COST)
    )  # fmt: skip
    result.notes.append(
        f"every gateway runs echo in-process; the traced ones export over OTLP/HTTP"
        f" (queue sized so no span is dropped) to a receiver in the bench process, which got"
        f" {exported} spans; 'off' has no OTEL_* variables set. A traced echo call makes 10"
        " spans (the request, 6 stages, the execution, 2 Redis scripts), recorded as plain"
        " records and written as OTLP protobuf by the gateway; a request the sampler leaves"
        " out makes none"
    )
    return result


def _configurations(endpoint: str) -> dict[str, dict[str, str]]:
    """Each gateway's OTEL_* variables, by the row that shows it."""
    on = {**_ON_ENV, "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint}
    configurations = {OFF: {}, "tracing on, every request traced": on}
    for ratio in SAMPLED_RATIOS:
        configurations[f"tracing on, 1 request in {round(1 / ratio)} traced"] = {
            **on,
            "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
            "OTEL_TRACES_SAMPLER_ARG": str(ratio),
        }
    configurations[OFF_AGAIN] = {}  # the same as OFF: how far two equal gateways differ
    return configurations


def _shown(rates: list[float]) -> str:
    return " ".join(f"{rate:.0f}" for rate in rates)
