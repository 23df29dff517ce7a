"""The console's chains: the calls of one trace (an agent's run passes one `traceparent`),
newest chains first, each with its deadline burn-down: when each call started and ended after
the chain's first call, the time it was granted, the time left to the run's deadline when it
ended, and how it ended (a BUDGET_EXHAUSTED or TOOL_TIMEOUT shows where the deadline ran out),
and whether ATBA hedged it (a second attempt beside a slow first one: when, and which won).
The bar of each call sits on a scale that ends at the deadline, when the run had one.

Read from one bounded window of the audit stream (`WINDOW_RECORDS` newest records).
"""

from __future__ import annotations

from collections import defaultdict

from fastapi import Request
from fastapi.responses import HTMLResponse

from gateway.http.console.page_layout import esc, page, table
from gateway.http.gateway_parts import gateway_parts
from gateway.telemetry import AuditLog, AuditRecord

WINDOW_RECORDS = 2000
MAX_CHAINS = 20
_BAR_PX = 400


def _chains(records: list[AuditRecord]) -> list[list[AuditRecord]]:
    """Tool-call chains, newest first, each oldest call first."""
    by_trace: dict[str, list[AuditRecord]] = defaultdict(list)
    for record in records:  # newest first: the first chains met are the newest
        if record.trace_id and record.tool:
            by_trace[record.trace_id].append(record)
    return [sorted(calls, key=lambda r: r.id) for calls in list(by_trace.values())[:MAX_CHAINS]]


def _hedge_cell(call: AuditRecord) -> str:
    """What ATBA's hedge did for the call: nothing shown when it waited."""
    hedge = call.hedge or {}
    if hedge.get("started"):
        return f"hedged at {hedge.get('after_ms')} ms, {hedge.get('winner') or '?'} won"
    if hedge.get("not_started"):
        return "hedge not started"
    return ""


def _burn_down(calls: list[AuditRecord]) -> str:
    # A record is written when its call ends: it began duration_ms earlier.
    start = min(c.at_ms - c.duration_ms for c in calls)
    deadline = next((c.deadline_ms for c in calls if c.deadline_ms is not None), None)
    end = max(max(c.at_ms for c in calls), deadline or 0)
    span = max(end - start, 1.0)
    rows = []
    for call in calls:
        began = call.at_ms - call.duration_ms - start
        bar = (
            f'<div style="margin-left:{began / span * _BAR_PX:.0f}px;'
            f"width:{max(call.duration_ms / span * _BAR_PX, 1):.0f}px;height:0.8rem;"
            f'background:{"#4a4" if call.outcome == "ok" else "#c33"}"></div>'
        )
        left = "" if call.deadline_ms is None else call.deadline_ms - call.at_ms
        rows.append(
            [call.tool, call.outcome, call.code, round(began, 1), call.granted_ms or "",
             round(call.duration_ms, 1), round(began + call.duration_ms, 1), left,
             _hedge_cell(call), bar]
        )  # fmt: skip
    columns = ["tool", "outcome", "code", "start ms", "granted ms", "took ms", "elapsed ms"]
    columns += ["left to deadline ms", "hedge", "burn-down"]
    return table(columns, rows, raw=1)


async def chains_page(request: Request) -> HTMLResponse:
    await gateway_parts(request.app).audit.flush()
    records = await AuditLog(gateway_parts(request.app).redis).newest(WINDOW_RECORDS)
    parts = []
    for calls in _chains(records):
        first = calls[0]
        parts.append(
            f"<h2>trace {esc(first.trace_id)}</h2><p>{esc(first.tenant)}/{esc(first.agent)},"
            f" {len(calls)} calls</p>" + _burn_down(calls)
        )
    body = "".join(parts) or '<p class="note">No tool calls in the newest records.</p>'
    body += (
        f'<p class="note">The newest {MAX_CHAINS} chains among the newest {WINDOW_RECORDS}'
        " audit records.</p>"
    )
    return page("chains", "Chains and their deadline burn-down", body)
