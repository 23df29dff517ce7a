"""The console's live feed: the newest audit records, then each new one as it is appended.

The page renders one bounded window of the stream (`PAGE_RECORDS`, older windows by
`?before=<entry id>`); its few lines of script open `/console/feed/events`, server-sent
events tailing the stream with XREAD BLOCK from the newest entry (or the `Last-Event-ID` a
reconnecting browser sends), one event per read holding the rows of the records it found.
Each stream is bounded: `TAIL_BATCH` records a read, at most `MAX_FEEDS` streams open per
gateway process, and `MAX_STREAM_S` seconds per stream (the browser reconnects where it
left off).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator

from fastapi import Request
from fastapi.responses import HTMLResponse, StreamingResponse

from gateway.gateway_error import GatewayError
from gateway.http.console.page_layout import esc, page, table
from gateway.http.gateway_parts import gateway_parts
from gateway.telemetry import AuditLog, AuditRecord
from protocol import ErrorCode

PAGE_RECORDS = 50
TAIL_BATCH = 100
BLOCK_MS = 1000
MAX_FEEDS = 16
MAX_STREAM_S = 300.0
GATHER_S = 0.2  # after a read that found records: let the next ones gather (one read, not many)
COLUMNS = ["time (UTC)", "tenant", "agent", "operation", "tool", "outcome", "code", "stage", "ms"]
_ENTRY_ID = re.compile(r"^\d{1,20}-\d{1,20}$")

FEED_SCRIPT = """
const rows = document.getElementById("feed");
const feed = new EventSource("/console/feed/events");
feed.addEventListener("audit", (event) => {
  for (const record of JSON.parse(event.data)) {
    const tr = document.createElement("tr");
    for (const value of record) {
      const td = document.createElement("td");
      td.textContent = value;
      if (["ok", "refused", "failed"].includes(value)) td.className = value;
      tr.appendChild(td);
    }
    rows.insertBefore(tr, rows.firstChild);
  }
  while (rows.rows.length > 200) rows.deleteRow(-1);
});
feed.onopen = () => { document.getElementById("live").textContent = "live"; };
"""  # the console's only script: its hash is in every console page's Content-Security-Policy


def feed_cells(record: AuditRecord) -> list[str | float]:
    clock = time.strftime("%H:%M:%S", time.gmtime(record.at_ms / 1000))
    agent = record.agent
    if record.chain:  # made for other agents (gateway.delegation): whom, the first first
        agent += f" (for {' -> '.join(record.chain)})"
    if record.acted_by:
        agent += f" (by {record.acted_by})"
    return [
        f"{clock}.{record.at_ms % 1000:03d}",
        record.tenant,
        agent,
        record.operation,
        record.tool,
        record.outcome,
        record.code,
        record.stage,
        round(record.duration_ms, 1),
    ]


async def feed_page(request: Request, before: str | None) -> HTMLResponse:
    await gateway_parts(request.app).audit.flush()  # this replica's own records, up to now
    audit = AuditLog(gateway_parts(request.app).redis)
    cursor = before if before and _ENTRY_ID.match(before) else None
    records = await audit.newest(PAGE_RECORDS, before=cursor)
    older = (
        f'<p><a href="/console/feed?before={esc(records[-1].id)}">older</a></p>'
        if len(records) == PAGE_RECORDS
        else ""
    )
    live = cursor is None  # an older window stays still
    body = (
        ('<p>Feed: <span id="live">connecting</span></p>' if live else "")
        + table(COLUMNS, [feed_cells(r) for r in records], body_id="feed")
        + older
        + (f"<script>{FEED_SCRIPT}</script>" if live else "")
    )
    return page("feed", "Live feed: tool calls and refusals", body)


async def feed_events(request: Request) -> StreamingResponse:
    state = request.app.state  # the count of open feeds: this replica's, kept as it runs
    open_feeds = getattr(state, "console_feeds", 0)
    if open_feeds >= MAX_FEEDS:
        raise GatewayError.of(
            ErrorCode.RATE_LIMITED,
            f"{MAX_FEEDS} live feeds are open on this gateway already: close one, or read"
            " GET /v1/audit",
        )
    audit = AuditLog(gateway_parts(request.app).redis)
    resumed = request.headers.get("last-event-id", "")
    after = resumed if _ENTRY_ID.match(resumed) else await audit.last_id()
    state.console_feeds = open_feeds + 1

    async def events() -> AsyncIterator[str]:
        nonlocal after
        try:
            yield "retry: 1000\n\n"
            ends = time.monotonic() + MAX_STREAM_S
            while time.monotonic() < ends:  # a closed connection fails a send, ending this
                records = await audit.tail(after, count=TAIL_BATCH, block_ms=BLOCK_MS)
                if not records:
                    yield ": idle\n\n"  # a comment: finds a closed connection
                    continue
                # One event per read, not per record: a busy gateway sends a few a second.
                after = records[-1].id
                data = json.dumps([feed_cells(record) for record in records])
                yield f"event: audit\nid: {after}\ndata: {data}\n\n"
                await asyncio.sleep(GATHER_S)  # a busy gateway: a few reads a second, not hundreds
        finally:
            state.console_feeds -= 1

    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    return StreamingResponse(events(), media_type="text/event-stream", headers=headers)
