"""The console's sandboxes page: the pool's backend, size and caps, and its sandboxes per
tenant (in use, idle and warm, agents with one in use)."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import HTMLResponse

from gateway.http.console.page_layout import page, table
from gateway.http.gateway_parts import gateway_parts
from sandbox import SandboxPool


async def sandboxes_page(request: Request) -> HTMLResponse:
    parts = gateway_parts(request.app)
    executor = parts.executor
    if not isinstance(executor, SandboxPool):
        body = (
            f"<p>Tools run on the {parts.sandbox_name!s} executor here: no sandbox"
            " pool, no isolation.</p>"
        )
        return page("sandboxes", "Sandboxes", body)
    pool_rows: list[list[object]] = [
        ["backend", executor.name],
        ["sandboxes (all states)", executor.size],
        ["ready spares", executor.ready_spares],
        ["cap: all / per tenant / per agent",
         f"{executor.config.pool_max} / {executor.tenant_max} / {executor.agent_max}"],
        ["started since start-up", executor.started],
        ["recycled since start-up", executor.recycled],
    ]  # fmt: skip
    tenant_rows = [
        [tenant, in_use, idle, agents]
        for tenant, (in_use, idle, agents) in executor.tenant_stats().items()
    ]
    body = (
        table(["pool", "value"], pool_rows)
        + "<h2>Per tenant</h2>"
        + table(["tenant", "in use", "idle (warm)", "agents in use"], tenant_rows)
    )
    return page("sandboxes", "Sandboxes", body)
