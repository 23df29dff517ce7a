"""`conclave bench federation`: what putting an MCP server behind the gateway costs.

`mcp_http` rows: a FastMCP upstream (`conclave.bench.mcp_upstream`) in its own process,
called by the official `mcp` client directly, then through a gateway (its own process, an
`mcp_http` source in a `conclave.toml`) at `/mcp`, with the same client. Figures: the p50 the
gateway adds, and calls/s at concurrency 16 against the upstream's own.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio

from conclave.bench.mcp_upstream import running_upstream
from conclave.bench.stats import percentile
from conclave.bench.suite import BenchContext, Goal, SuiteResult, Table
from conclave.stack import EmbeddedStack
from gateway import Settings

GOAL_ADDED_P50_MS = 1.5
GOAL_RATE_SHARE = 0.8
WORKERS = 16
DIRECT = "mcp_http: upstream direct (mcp client)"
GATEWAY = "mcp_http: through the gateway /mcp (mcp client)"

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
    """p50 samples and calls/s at concurrency 16 of `tool` at `url`, one client per worker."""
    from mcp.client.client import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with AsyncExitStack() as stack:
        calls: list[Call] = []
        for _ in range(WORKERS + 1):
            http = await stack.enter_async_context(create_mcp_http_client(headers=headers))
            transport = streamable_http_client(url, http_client=http)
            client = await stack.enter_async_context(Client(transport))

            async def call(client: Client = client) -> None:
                answer = await client.call_tool(tool, {"message": "ping"})
                if answer.is_error:
                    raise RuntimeError(f"a bench call failed: {answer}")

            calls.append(call)
        samples = await _latencies(calls[-1], count)
        rate = await _throughput(calls[:WORKERS], seconds)
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
        " answers) in its own process; the gateway is another process with an in-process"
        " executor; the client (the official mcp SDK, one client per worker) runs in the bench"
        " process, on the same 2 cores, and is part of both figures"
    )
    return result
