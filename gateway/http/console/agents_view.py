"""The console's agents page: every registered agent, its rights, and a Revoke button."""

from __future__ import annotations

import time

from fastapi import Request
from fastapi.responses import HTMLResponse

from gateway.http.console.page_layout import esc, page, post_button, table
from gateway.http.gateway_parts import gateway_parts
from gateway.identity import AgentDirectory


async def agents_page(request: Request, form_token: str, notice: str = "") -> HTMLResponse:
    directory: AgentDirectory = gateway_parts(request.app).agents
    rows = []
    for record in await directory.list():
        revoke = (
            ""
            if record.revoked
            else post_button(
                "/console/agents/revoke",
                "Revoke",
                form_token,
                tenant=record.tenant,
                agent=record.agent,
            )
        )
        created = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(record.created_at_ms / 1000))
        rows.append(
            [
                record.tenant,
                record.agent,
                " ".join(record.scopes),
                record.obo or "",
                created,
                "revoked" if record.revoked else "active",
                revoke,
            ]
        )
    body = (f'<p class="notice">{esc(notice)}</p>' if notice else "") + table(
        ["tenant", "agent", "scopes", "on behalf of", "registered (UTC)", "status", ""],
        rows,
        raw=1,
    )
    body += (
        '<p class="note">Revoking moves the agent to its next generation: every token it holds'
        " is refused from its next call on, on every replica.</p>"
    )
    return page("agents", "Agents and tokens", body)
