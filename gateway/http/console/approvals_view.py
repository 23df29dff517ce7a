"""The console's approvals page: the calls waiting for a person, each with its exact
arguments, the policy that held it and why, and approve and deny buttons.

An approval is an approver's: the admin picks, for each call, one of the tenant's registered
agents whose scopes hold `approve:<glob>` over the tool, and decides as that identity
(`ApprovalBook.decide`, with the same checks as over REST: not the call's own caller, nor one
acting for its user, nor an agent on its chain). The record names the approver and "via admin
(console)"; the audit records the decision as the approver's.
"""

from __future__ import annotations

import json
import time

from fastapi import Request
from fastapi.responses import HTMLResponse

from gateway.approvals import Decision
from gateway.gateway_error import GatewayError
from gateway.http.console.page_layout import esc, page, table
from gateway.http.gateway_parts import gateway_parts
from protocol import AgentRecord, ApprovalRecord, Principal

ACTED_BY = "admin (console)"
MAX_TENANTS = 20  # a page, not a dump: the first tenants by name


def registered_principal(record: AgentRecord) -> Principal:
    """A registered agent as a principal of its registration's scopes (what the console acts,
    or reads, as)."""
    return Principal(
        tenant=record.tenant,
        agent=record.agent,
        obo=record.obo,
        scopes=tuple(record.scopes),
        expires_at=int(time.time()) + 60,
        token_id="console",
    )


def _decision_form(held: ApprovalRecord, approvers: list[str], form_token: str) -> str:
    options = "".join(f'<option value="{esc(a)}">{esc(a)}</option>' for a in approvers)
    if not options:
        return '<span class="note">no agent of this tenant may approve this tool</span>'
    return (
        f'<form class="decide" method="post" action="/console/approvals/decide">'
        f'<input type="hidden" name="form_token" value="{esc(form_token)}">'
        f'<input type="hidden" name="id" value="{esc(held.id)}">'
        f'<input type="hidden" name="tenant" value="{esc(held.tenant)}">'
        f'<label>As <select name="approver">{options}</select></label> '
        '<label>Note <input name="note" maxlength="1024"></label> '
        '<button name="decision" value="approved">Approve</button> '
        '<button name="decision" value="denied">Deny</button></form>'
    )


async def approvals_page(request: Request, form_token: str, notice: str = "") -> HTMLResponse:
    parts = gateway_parts(request.app)
    agents = [r for r in await parts.agents.list() if not r.revoked]
    tenants = sorted({r.tenant for r in agents})[:MAX_TENANTS]
    rows: list[list[object]] = []
    for tenant in tenants:
        for held in await parts.approvals.pending_of(tenant):
            approvers = [
                f"{r.tenant}/{r.agent}"
                for r in agents
                if r.tenant == tenant and registered_principal(r).may_approve(held.tool)
            ]
            asked = held.agent + (f" ({held.obo})" if held.obo else "")
            expires = time.strftime("%H:%M:%S", time.gmtime(held.expires_at_ms / 1000))
            arguments = esc(json.dumps(held.arguments, indent=2, sort_keys=True))
            rows.append(
                [
                    held.id,
                    held.tenant,
                    asked,
                    held.tool,
                    f"{held.policy}: {held.reason}" if held.reason else held.policy,
                    expires,
                    f'<pre class="arguments">{arguments}</pre>',
                    _decision_form(held, approvers, form_token),
                ]
            )
    body = (f'<p class="notice" id="notice">{esc(notice)}</p>' if notice else "") + table(
        ["id", "tenant", "asked by", "tool", "policy", "expires (UTC)", "arguments", ""],
        rows,
        raw=2,
    )
    body += (
        '<p class="note">Calls an <code>approve</code> policy rule holds, waiting on the replica'
        " they came to. Approved, the call runs with exactly these arguments; denied, its caller"
        " gets APPROVAL_DENIED with the note. You decide as one of the tenant's approvers"
        " (agents registered with <code>approves</code>).</p>"
    )
    return page("approvals", "Calls waiting for approval", body)


async def decide_as_approver(request: Request, form: dict[str, str]) -> str:
    """Decide the posted approval as the posted approver; a notice saying what happened."""
    parts = gateway_parts(request.app)
    tenant, _, agent = form.get("approver", "").partition("/")
    record = next(
        (r for r in await parts.agents.list(tenant) if r.agent == agent and not r.revoked), None
    )
    if record is None or tenant != form.get("tenant"):
        return f"No approver {tenant}/{agent} is registered in tenant {form.get('tenant')}."
    decision: Decision = "approved" if form.get("decision") == "approved" else "denied"
    try:
        settled = await parts.approvals.decide(
            registered_principal(record),
            form.get("id", ""),
            decision,
            form.get("note", "")[:1024],
            acted_by=ACTED_BY,
        )
    except GatewayError as exc:
        return f"{exc.error.code.value}: {exc.error.message}"
    return f"{settled.id} {settled.status} by {settled.decided_by}: its call of {settled.tool}"
