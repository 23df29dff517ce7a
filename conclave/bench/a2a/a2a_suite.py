"""`conclave bench a2a`: what putting an A2A agent behind the gateway costs.

An A2A agent on the reference SDK (`conclave.bench.a2a.echo_agent`) in its own process, called
directly, then through a gateway (its own process, the agent declared as `[[a2a_agent]]`) at
`/a2a/bench`, by the same lean client: JSON-RPC `SendMessage` (not streamed) over keep-alive
HTTP/1.1 connections, one per worker. Figures: the p50 the gateway adds per hop, and calls/s
at concurrency 16 against the agent's own. Measured after a latency window's worth of calls,
so the gateway has history (each call binds a task to its caller).

Then three hops of hosted agents on the bench's sandbox backend
(`conclave.bench.a2a.cascade_latency`): from cancelling the first agent's task to the third
one's tool process gone (goal: p99 at most 250 ms), and chains under a deadline (goal: none
answered, or still running a tool, past it).

Then the chaos row (`conclave.bench.a2a.worker_chaos`): a hosted agent's worker killed mid-task
100 times (10 quick); yes or no: every task ended exactly once with no artifact lost or
doubled, and each killed worker's task resumed by another within the lease plus 1 s.
"""

from __future__ import annotations

import json
import uuid
from typing import Any
from urllib.parse import urlsplit

import anyio

from conclave.bench.a2a.cascade_latency import (
    DEADLINE_MS,
    DEADLINE_SLACK_MS,
    cascade_samples,
    chain_config,
)
from conclave.bench.a2a.echo_agent import running_agent
from conclave.bench.a2a.worker_chaos import LEASE_S, RESUME_GOAL_S, chaos_config, chaos_samples
from conclave.bench.core import (
    BenchContext,
    Call,
    Goal,
    Http1Connection,
    SuiteResult,
    Table,
    add_hop_rows,
    alternated_latencies,
    encode_request,
    measuring_settings,
    percentile,
    throughput,
)
from conclave.stack import EmbeddedStack
from gateway import Settings
from protocol import A2A_VERSION, A2A_VERSION_HEADER

GOAL_ADDED_P50_MS = 1.5
GOAL_RATE_SHARE = 0.8
GOAL_CANCEL_P99_MS = 250.0
WORKERS = 16
HISTORY: int = Settings.model_fields["latency_window_max"].default  # calls before a row
DIRECT = "agent direct"
GATEWAY = "through the gateway /a2a/bench"


def _calls(url: str, token: str | None) -> tuple[list[Call], list[Http1Connection]]:
    """One SendMessage call function per worker (and one more for latencies)."""
    headers = {"Content-Type": "application/json", A2A_VERSION_HEADER: A2A_VERSION}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    split = urlsplit(url)
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": uuid.uuid4().hex,
                "role": "ROLE_USER",
                "parts": [{"text": "hi"}],
            }
        },
    }
    raw = encode_request(
        "POST", f"{split.scheme}://{split.netloc}", split.path or "/", headers,
        json.dumps(message).encode(),
    )  # fmt: skip
    connections = [Http1Connection(url) for _ in range(WORKERS + 1)]
    calls: list[Call] = []
    for connection in connections:

        async def call(connection: Http1Connection = connection) -> None:
            status, body = await connection.request(raw)
            answer = json.loads(body)
            if status != 200 or "result" not in answer:
                raise RuntimeError(f"a bench call failed: {status} {body[:300]!r}")

        calls.append(call)
    return calls, connections


async def _measure(
    direct_url: str, gateway_url: str, token: str, count: int, seconds: float
) -> Any:
    direct, direct_connections = _calls(direct_url, None)
    through, through_connections = _calls(gateway_url, token)
    try:
        for _ in range(HISTORY):
            await through[-1]()
        direct_samples, through_samples = await alternated_latencies(
            [direct[-1], through[-1]], count
        )
        direct_rate = await throughput(direct[:WORKERS], seconds)
        through_rate = await throughput(through[:WORKERS], seconds)
    finally:
        for connection in [*direct_connections, *through_connections]:
            await connection.aclose()
    return {DIRECT: (direct_samples, direct_rate), GATEWAY: (through_samples, through_rate)}


def run(ctx: BenchContext) -> SuiteResult:
    count = 300 if ctx.quick else 2000
    seconds = 2.0 if ctx.quick else 8.0
    task = ctx.progress.add_task("a2a: agent direct vs through the gateway", total=1)
    with running_agent() as agent_url:
        config = ctx.out_dir / "a2a-conclave.toml"
        config.write_text(f'[[a2a_agent]]\nname = "bench"\nurl = "{agent_url}"\n')
        settings = measuring_settings(ctx.stack.settings, config=config)
        with EmbeddedStack(settings, log_path=ctx.gateway_log("a2a")) as gateway:
            token = gateway.token("bench", "a2a-caller", ["agent:bench"])
            rows = anyio.run(_measure, agent_url, f"{gateway.url}/a2a/bench", token, count, seconds)
    ctx.progress.advance(task)
    result = SuiteResult("a2a")
    add_hop_rows(
        result,
        "a2a: SendMessage to an A2A agent, direct vs through the gateway"
        " (ms; calls/s at concurrency 16)",
        rows,
        direct=DIRECT,
        through=GATEWAY,
        label="a2a",
        goal_added_ms=GOAL_ADDED_P50_MS,
        goal_share=GOAL_RATE_SHARE,
        direct_name="the agent's own",
    )
    result.notes.append(
        "a2a rows: the agent is the reference SDK's server (a2a-sdk 1.3, its in-memory task"
        " store) in its own process, answering each SendMessage with a completed task. Both"
        " rows use the same client in the bench process (JSON-RPC on keep-alive HTTP/1.1"
        " connections, one per worker), their latencies taken in turns. 'through the gateway'"
        " adds the gateway's process: token check, scope, rate limit in Redis, the task bound"
        " to its caller in Redis, audit, and its own pooled connections to the agent. Client,"
        " gateway, Redis and agent share the machine's 2 cores"
    )
    _cascade(ctx, result)
    _chaos(ctx, result)
    return result


def _chaos(ctx: BenchContext, result: SuiteResult) -> None:
    rounds = 10 if ctx.quick else 100
    task = ctx.progress.add_task(f"a2a: a worker killed mid-task {rounds} times", total=1)
    config = ctx.out_dir / "a2a-chaos.toml"
    config.write_text(chaos_config())
    settings = measuring_settings(ctx.stack.settings, config=config)
    with EmbeddedStack(settings, log_path=ctx.gateway_log("a2a-chaos")) as gateway:
        samples = chaos_samples(gateway, rounds, ctx.out_dir / "a2a-chaos-marks")
    ctx.progress.advance(task)
    resumed = samples.resumed_s
    table = Table(
        f"a2a: a hosted agent's worker killed mid-task {rounds} times (lease {LEASE_S:g} s)",
        ["what", "n", "yes/no", "p50 s", "max s"],
    )
    table.rows.append(["every task ended exactly once, no artifact lost or doubled", rounds,
                       "yes" if samples.exactly_once else "no", "", ""])  # fmt: skip
    table.rows.append([f"resumed by another worker within {RESUME_GOAL_S:g} s", len(resumed),
                       "yes" if samples.resumed_in_time else "no",
                       percentile(resumed, 0.5) if resumed else 0.0,
                       max(resumed, default=0.0)])  # fmt: skip
    result.tables.append(table)
    result.figures["a2a_chaos_faults"] = len(samples.faults)
    result.figures["a2a_chaos_resumed_max_s"] = max(resumed, default=0.0)
    result.goals.append(
        Goal(
            f"a2a: a worker killed mid-task {rounds} times: every task ended once, artifacts whole",
            "yes",
            "yes" if samples.exactly_once else f"no: {'; '.join(samples.faults[:3])}",
            samples.exactly_once,
        )
    )
    result.goals.append(
        Goal(
            "a2a: a dead worker's task resumed (max)",
            f"<= {RESUME_GOAL_S:g} s",
            f"{max(resumed, default=0.0):.2f} s",
            samples.resumed_in_time,
        )
    )
    result.notes.append(
        f"a2a chaos rows: two worker processes (the SDK's serve_a2a) serve an idempotent hosted"
        f" agent with a {LEASE_S:g} s lease; each round's task is started by one, which the"
        " bench kills with SIGKILL at a random point of its 0.3 s run, starting another in its"
        " place; the survivor runs the task again once the lease lapsed. Resumed: from the"
        f" kill to the survivor's start. {samples.ended_after_kill} of {rounds} kills came"
        " after the answer had landed (nothing to resume). Checked from the task's records:"
        " one final status on its event stream, COMPLETED, its two artifacts once each"
    )


def _cascade(ctx: BenchContext, result: SuiteResult) -> None:
    rounds, chains = (10, 10) if ctx.quick else (50, 100)
    task = ctx.progress.add_task("a2a: three hops, cancelled and under deadlines", total=1)
    config = ctx.out_dir / "a2a-chain.toml"
    config.write_text(chain_config())
    backend = ctx.stack.settings.sandbox.backend
    settings = measuring_settings(ctx.stack.settings, config=config, sandbox_backend=backend)
    with EmbeddedStack(settings, log_path=ctx.gateway_log("a2a-chain")) as gateway:
        samples = cascade_samples(gateway, rounds, chains)
    ctx.progress.advance(task)
    cancel = samples.cancel_to_gone_ms
    p50, p99 = percentile(cancel, 0.5), percentile(cancel, 0.99)
    past = samples.past_deadline_ms
    table = Table(
        f"a2a: three hops of hosted agents on the {backend} backend (ms)",
        ["what", "n", "p50", "p99", "max"],
    )
    table.rows.append(["cancel A's task -> C's tool process gone", len(cancel), p50, p99,
                       max(cancel)])  # fmt: skip
    table.rows.append(["past the deadline: answer or C's tool gone", len(past),
                       percentile(past, 0.5), percentile(past, 0.99), max(past)])  # fmt: skip
    result.tables.append(table)
    result.figures["a2a_cancel_three_hops_p99_ms"] = p99
    result.figures["a2a_deadline_violations"] = samples.deadline_violations
    result.series["a2a_cancel_three_hops_ms"] = cancel
    result.goals.append(
        Goal(
            "a2a: cancel across three hops, to the last tool process gone (p99)",
            f"<= {GOAL_CANCEL_P99_MS:g} ms",
            f"{p99:.1f} ms",
            p99 <= GOAL_CANCEL_P99_MS,
        )
    )
    result.goals.append(
        Goal(
            f"a2a: deadline violations over {samples.deadline_chains} three-hop chains",
            "0",
            str(samples.deadline_violations),
            samples.deadline_violations == 0,
        )
    )
    result.notes.append(
        f"a2a chain rows: A's worker delegates to B's, B's to C's, C's runs a sleep in its"
        f" sandbox; the workers are the SDK's, in the bench process. A deadline chain is sent"
        f" {DEADLINE_MS} ms before its deadline and violates it when its answer comes, or C's"
        f" process is still alive, more than {DEADLINE_SLACK_MS:g} ms past it;"
        f" {samples.ran_to_the_deadline} of {samples.deadline_chains} ran until the deadline"
        " stopped C's tool, the others were refused early by ATBA (the tool's window said it"
        " could not finish in the time left)"
    )
