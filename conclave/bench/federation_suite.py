"""`conclave bench federation`: what putting an MCP server behind the gateway costs.

`mcp_http` rows: a FastMCP upstream (`conclave.bench.mcp_upstream`) in its own process,
called directly, then through a gateway (its own process, an `mcp_http` source in a
`conclave.toml`) at `/mcp`, by the same lean JSON-RPC client. Figures: the p50 the gateway
adds, and calls/s at concurrency 16 against the upstream's own.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio

from conclave.bench.http1 import Http1Connection, encode_request
from conclave.bench.mcp_upstream import running_upstream
from conclave.bench.stats import percentile
from conclave.bench.suite import BenchContext, Goal, SuiteResult, Table
from conclave.stack import EmbeddedStack
from gateway import Settings

GOAL_ADDED_P50_MS = 1.5
GOAL_RATE_SHARE = 0.8
WORKERS = 16
DIRECT = "mcp_http: upstream direct"
GATEWAY = "mcp_http: through the gateway /mcp"

Call = Callable[[], Awaitable[None]]


async def _latencies(call: Call, count: int) -> list[float]:
    for _ in range(min(50, count)):  # warm connections, sessions and scripts
        await call()
    samples = []
    for _ in range(count):
        began = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - began) * 1000)
    return samples


async def _throughput(calls: list[Call], seconds: float) -> float:
    done = 0
    stop = time.perf_counter() + seconds

    async def worker(call: Call) -> None:
        nonlocal done
        while time.perf_counter() < stop:
            await call()
            done += 1

    began = time.perf_counter()
    async with anyio.create_task_group() as group:
        for call in calls:
            group.start_soon(worker, call)
    return done / (time.perf_counter() - began)


async def _client_rows(url: str, token: str | None, tool: str, count: int, seconds: float) -> Any:
    """p50 samples and calls/s at concurrency 16 of `tool` at `url`, one connection per worker.

    The client is the same for both rows: MCP `tools/call` as JSON-RPC over a keep-alive
    HTTP/1.1 connection (`Http1Connection`), prepared once; it costs ~0.1 ms of CPU a call,
    where the official mcp client costs several, so on two shared cores the figures measure
    the servers, not the client.
    """
    headers = {"Accept": "application/json, text/event-stream"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    split = urlsplit(url)
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": {"message": "ping"}},
    }
    raw = encode_request(
        "POST",
        f"{split.scheme}://{split.netloc}",
        split.path,
        headers,
        json.dumps(message).encode(),
    )
    connections = [Http1Connection(url) for _ in range(WORKERS + 1)]
    calls: list[Call] = []
    for connection in connections:

        async def call(connection: Http1Connection = connection) -> None:
            status, body = await connection.request(raw)
            answer = json.loads(body)
            if status != 200 or "result" not in answer or answer["result"].get("isError"):
                raise RuntimeError(f"a bench call failed: {status} {body[:300]!r}")

        calls.append(call)
    try:
        samples = await _latencies(calls[-1], count)
        rate = await _throughput(calls[:WORKERS], seconds)
    finally:
        for connection in connections:
            await connection.aclose()
    return samples, rate


def _gateway_settings(base: Settings, config: Path) -> Settings:
    return Settings(
        redis_url=base.redis_url,
        port=0,
        sandbox_backend="inprocess",  # no sandbox in the path: upstream calls never use one
        config=config,
        rate_limit_per_s=1_000_000.0,  # measure the limiter's cost, never its refusals
        rate_limit_burst=1_000_000,
        tenant_rate_limit_per_s=1_000_000.0,
        tenant_rate_limit_burst=1_000_000,
        log_level="warning",
    )


def _http_rows(ctx: BenchContext) -> dict[str, Any]:
    count = 300 if ctx.quick else 2000
    seconds = 2.0 if ctx.quick else 8.0
    rows: dict[str, Any] = {}
    with running_upstream() as upstream_url:
        config = ctx.out_dir / "federation-conclave.toml"
        config.write_text(f'[[source]]\nname = "up"\nkind = "mcp_http"\nurl = "{upstream_url}"\n')
        settings = _gateway_settings(ctx.stack.settings, config)
        rows[DIRECT] = anyio.run(_client_rows, upstream_url, None, "echo", count, seconds)
        with EmbeddedStack(settings, log_path=ctx.gateway_log("federation")) as gateway:
            token = gateway.token("bench", "federation", ["tool:up.*"])
            rows[GATEWAY] = anyio.run(
                _client_rows, f"{gateway.url}/mcp", token, "up.echo", count, seconds
            )
    return rows


def run(ctx: BenchContext) -> SuiteResult:
    task = ctx.progress.add_task("federation: mcp_http upstream direct vs through", total=1)
    rows = _http_rows(ctx)
    ctx.progress.advance(task)
    table = Table(
        "federation: echo on an MCP upstream, direct vs through the gateway"
        " (ms; calls/s at concurrency 16)",
        ["path", "p50", "p99", "added p50", "calls/s c=16", "share of direct calls/s"],
    )
    result = SuiteResult("federation", tables=[table])
    direct_samples, direct_rate = rows[DIRECT]
    direct_p50 = statistics.median(direct_samples)
    for path, (samples, rate) in rows.items():
        p50 = statistics.median(samples)
        table.rows.append(
            [
                path,
                p50,
                percentile(samples, 0.99),
                p50 - direct_p50,
                round(rate),
                rate / direct_rate,
            ]
        )
        result.series[path] = {"p50": p50, "rate": rate}
    _, rate = rows[GATEWAY]
    added = statistics.median(rows[GATEWAY][0]) - direct_p50
    share = rate / direct_rate
    result.figures["mcp_http added_p50_ms"] = added
    result.figures["mcp_http calls_per_s share"] = share
    result.goals += [
        Goal("mcp_http: added p50", f"<= {GOAL_ADDED_P50_MS} ms", f"{added:.3f} ms",
             added <= GOAL_ADDED_P50_MS),
        Goal("mcp_http: calls/s c=16 vs the upstream's own", f">= {GOAL_RATE_SHARE:.0%}",
             f"{share:.0%}", share >= GOAL_RATE_SHARE),
    ]  # fmt: skip
    result.notes.append(
        "mcp_http rows: the upstream is a FastMCP server (stateless streamable HTTP, JSON"
        " answers) in its own process. Both rows use the same client in the bench process: an"
        " MCP tools/call of echo as JSON-RPC on keep-alive HTTP/1.1 connections (one per"
        " worker), ~0.1 ms of client CPU a call. 'upstream direct' is that client against the"
        " upstream; 'through the gateway' is the same client against the gateway's /mcp (its"
        " own process: token check, policy, budget and rate limit in Redis, audit) which calls"
        " the upstream over its own pooled connections. Client, gateway, Redis and upstream"
        " share the machine's 2 cores, so at concurrency 16 the gateway row also pays for"
        " the gateway's CPU"
    )
    return result
