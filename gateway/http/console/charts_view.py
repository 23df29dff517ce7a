"""The console's charts: each tool's latency (p50 and p95 per minute) and each tenant's
requests and refusals per minute, over the last `SERIES_MINUTES` minutes.

Read from the per-minute series the audit keeps (`gateway.telemetry.call_series`): one pipelined
round trip of `SERIES_MINUTES` hashes per tenant and for the tools, for at most `MAX_TENANTS`
tenants, and the requests refused before a token named a tenant. Drawn as inline SVG (`chart_svg`).
A minute with no requests has no point.
"""

from __future__ import annotations

import time

from fastapi import Request
from fastapi.responses import HTMLResponse

from gateway.http.console.chart_svg import Series, line_chart
from gateway.http.console.page_layout import esc, page
from gateway.http.gateway_parts import gateway_parts
from gateway.identity import AgentDirectory
from gateway.telemetry import SERIES_MINUTES, CallSeries, TenantMinute, ToolMinute

MAX_TENANTS = 20  # a page, not a dump: the first tenants by name
REFRESH_S = 30  # a minute's point fills in as its calls come
UNAUTHENTICATED = "(no tenant)"  # requests refused before a token named one


def _tool_charts(minutes: list[int], tools: dict[str, list[ToolMinute]]) -> str:
    parts = []
    for tool, points in tools.items():
        calls = sum(p.calls for p in points)
        parts.append(f'<h3>{esc(tool)}</h3><p class="note">{calls} calls</p>')
        p50 = [(p.minute, round(p.p50_ms, 2)) for p in points]
        p95 = [(p.minute, round(p.p95_ms, 2)) for p in points]
        parts.append(
            line_chart(
                f"latency {tool}",
                "ms",
                minutes,
                [Series("p50", "#36c", p50), Series("p95", "#c63", p95)],
            )
        )
    return "".join(parts) or '<p class="note">No tool calls in this window.</p>'


def _tenant_charts(minutes: list[int], tenants: dict[str, list[TenantMinute]]) -> str:
    parts = []
    for tenant, points in tenants.items():
        if not points:
            continue
        requests, refused = sum(p.requests for p in points), sum(p.refused for p in points)
        name = tenant or UNAUTHENTICATED
        parts.append(
            f'<h3>{esc(name)}</h3><p class="note">{requests} requests, {refused} refused</p>'
        )
        parts.append(
            line_chart(
                f"requests {name}",
                "requests",
                minutes,
                [
                    Series("requests", "#36c", [(p.minute, p.requests) for p in points]),
                    Series("refused", "#c33", [(p.minute, p.refused) for p in points]),
                ],
            )
        )
    return "".join(parts) or '<p class="note">No requests from these tenants in this window.</p>'


async def charts_page(request: Request) -> HTMLResponse:
    await gateway_parts(request.app).audit.flush()  # this replica's own records, up to now
    directory: AgentDirectory = gateway_parts(request.app).agents
    series = CallSeries(gateway_parts(request.app).redis)
    minutes = series.window(int(time.time() * 1000))
    tenants = sorted({r.tenant for r in await directory.list()})[:MAX_TENANTS]
    body = (
        "<h2>Tool latency (ms per call through the gateway, each minute's p50 and p95, last"
        f" {SERIES_MINUTES} minutes)</h2>"
        + _tool_charts(minutes, await series.tools(minutes))
        + f"<h2>Requests and refusals per tenant (per minute, last {SERIES_MINUTES} minutes)</h2>"
        + _tenant_charts(minutes, await series.tenants([*tenants, ""], minutes))
        + f'<p class="note">The first {MAX_TENANTS} tenants with registered agents, then'
        f" {UNAUTHENTICATED}: requests refused before a token named a tenant. Latency is"
        " read from a histogram of buckets 25 % apart (within about 12 %). The page reloads"
        f" every {REFRESH_S} s.</p>"
    )
    return page("charts", "Charts: latency and load over time", body, refresh_s=REFRESH_S)
