"""The console's quotas page: each quota (conclave.toml's `[[quota]]`) as the registered agents'
calls count against it: per subject (a tenant, an agent, a tool of theirs), each limit's use
in its current window, what remains and when the window resets (`QuotaBook.uses`, what
`GET /v1/quotas` shows an agent)."""

from __future__ import annotations

import time

from fastapi import Request
from fastapi.responses import HTMLResponse

from gateway.http.console.approvals_view import registered_principal
from gateway.http.console.page_layout import page, table
from gateway.http.gateway_parts import gateway_parts
from protocol import QuotaUse

MAX_AGENTS = 200  # a page, not a dump: the first registered agents


async def quotas_page(request: Request) -> HTMLResponse:
    parts = gateway_parts(request.app)
    shown: dict[tuple[str, str, str], QuotaUse] = {}
    if parts.quotas.quotas.rules:
        agents = [r for r in await parts.agents.list() if not r.revoked][:MAX_AGENTS]
        for record in agents:
            principal = registered_principal(record)
            tools = [t.name for t in parts.registry if t.callable_by(principal)]
            for use in await parts.quotas.uses(principal, tools):
                shown.setdefault((use.quota, use.subject, use.limit), use)
    rows = [
        [
            u.quota,
            u.subject,
            u.limit,
            f"{u.used:g}",
            f"{u.allowed:g}",
            f"{u.remaining:g}",
            time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(u.resets_at_ms / 1000)),
        ]
        for _, u in sorted(shown.items())
    ]
    body = table(
        ["quota", "subject", "limit", "used", "allowed", "remaining", "resets (UTC)"], rows
    )
    body += (
        '<p class="note">conclave.toml\'s <code>[[quota]]</code> rules, counted in Redis across'
        " every replica; a call past a limit is refused 429 RATE_LIMITED naming the quota,"
        " before any sandbox is touched. One row per subject the registered agents' calls"
        " count against.</p>"
    )
    return page("quotas", "Quotas: use and what remains", body)
