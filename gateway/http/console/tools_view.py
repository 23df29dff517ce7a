"""The console's tools page: each tool's source, and per tenant its p50/p95 as the allocator
sees them (the latency window in Redis) and its circuit breaker's state."""

from __future__ import annotations

import asyncio

from fastapi import Request
from fastapi.responses import HTMLResponse

from gateway.budgets import BreakerState, CircuitBreaker, LatencyEstimate, LatencyWindow
from gateway.http.console.page_layout import page, table
from gateway.http.gateway_parts import gateway_parts
from gateway.identity import AgentDirectory
from tools import ToolRegistry

MAX_TENANTS = 20  # a page, not a dump: the first tenants by name


async def tools_page(request: Request) -> HTMLResponse:
    parts = gateway_parts(request.app)
    registry: ToolRegistry = parts.registry
    directory: AgentDirectory = parts.agents
    window: LatencyWindow = parts.latency_window
    breaker: CircuitBreaker = parts.breaker
    tools = sorted(registry, key=lambda t: t.name)
    tool_rows = [
        [t.name, t.entrypoint.partition(":")[0], t.spec.intent.timeout_ms, t.spec.description]
        for t in tools
    ]
    tenants = sorted({r.tenant for r in await directory.list()})[:MAX_TENANTS]
    declared = {t.name: t.spec.intent.timeout_ms for t in tools}

    async def tenant_rows(tenant: str) -> list[list[str | int | float | None]]:
        estimates: dict[str, LatencyEstimate] = await window.estimates(tenant, declared)
        breakers: list[BreakerState] = await asyncio.gather(
            *(breaker.state(tenant, name) for name in declared)
        )
        return [
            [tenant, name, e.p50_ms, e.p95_ms, e.samples, e.censored, e.source, b.state, b.failures]
            for (name, e), b in zip(estimates.items(), breakers, strict=True)
        ]

    latency_rows = [
        row for rows in await asyncio.gather(*map(tenant_rows, tenants)) for row in rows
    ]
    body = (
        "<h2>Tools and their sources</h2>"
        + table(["tool", "source", "declared timeout (ms)", "description"], tool_rows)
        + "<h2>Latency and breakers, per tenant</h2>"
        + table(
            ["tenant", "tool", "p50 ms", "p95 ms", "samples", "censored", "from", "breaker",
             "failures"],
            latency_rows,
        )
        + f'<p class="note">The first {MAX_TENANTS} tenants with registered agents; "declared":'
        " too few samples yet, the tool's declared timeout stands in.</p>"
    )  # fmt: skip
    return page("tools", "Tool sources and tools", body)
