"""The console over HTTP, in-process: who gets in, what the pages show, what actions do."""

from __future__ import annotations

import html
import re
import time
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from gateway.config import Settings
from gateway.telemetry import AuditLog, AuditRecord
from protocol import ADMIN_KEY_HEADER, DEADLINE_HEADER
from tests.helpers import admin_headers, registered_token

pytestmark = pytest.mark.anyio

PAGES = ["agents", "tools", "feed", "namespaces", "chains", "sandboxes"]


async def _log_in(client: httpx.AsyncClient, settings: Settings) -> httpx.Response:
    key = settings.admin_key.get_secret_value()
    return await client.post("/console/login", data={"admin_key": key})


def _form_token(page: str) -> str:
    found = re.search(r'name="form_token" value="([0-9a-f]+)"', page)
    assert found, page
    return found.group(1)


async def _echo(client: httpx.AsyncClient, token: str) -> httpx.Response:
    body = {"arguments": {"message": "hi"}}
    headers = {"Authorization": f"Bearer {token}"}
    return await client.post("/v1/tools/echo/call", json=body, headers=headers)


async def test_pages_need_a_login_and_the_wrong_key_gets_none(
    client: httpx.AsyncClient,
) -> None:
    for name in PAGES:
        answer = await client.get(f"/console/{name}")
        assert answer.status_code == 303
        assert answer.headers["location"] == "/console/login"
    refused = await client.post("/console/login", data={"admin_key": "guess"})
    assert refused.status_code == 401
    assert "set-cookie" not in refused.headers
    assert (await client.get("/console/feed/events")).status_code == 403  # ADMIN_REQUIRED


async def test_login_sets_a_strict_httponly_session_and_every_page_renders(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    answer = await _log_in(client, settings)
    assert answer.status_code == 303
    cookie = answer.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "path=/console" in cookie
    assert settings.admin_key.get_secret_value().lower() not in cookie
    for name in PAGES:
        page = await client.get(f"/console/{name}")
        assert page.status_code == 200, (name, page.text)
        assert page.headers["content-type"].startswith("text/html")
    # A forged cookie is no session.
    client.cookies.set("conclave_console", "9999999999.abc.def", path="/console")
    assert (await client.get("/console/agents")).status_code == 303


async def test_revoke_refuses_the_agents_next_call_and_needs_the_form_token(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    token = await registered_token(client, admin_headers(settings), "acme", "scout", tools=["echo"])
    assert (await _echo(client, token)).status_code == 200
    await _log_in(client, settings)
    agents = (await client.get("/console/agents")).text
    assert "scout" in agents and "Revoke" in agents
    forged = {"tenant": "acme", "agent": "scout", "form_token": "0" * 64}
    assert (await client.post("/console/agents/revoke", data=forged)).status_code == 403
    assert (await _echo(client, token)).status_code == 200  # the forged post did nothing

    form = {"tenant": "acme", "agent": "scout", "form_token": _form_token(agents)}
    revoked = await client.post("/console/agents/revoke", data=form)
    assert revoked.status_code == 200
    assert "Revoked acme/scout" in revoked.text
    refused = await _echo(client, token)
    assert refused.status_code == 401
    assert refused.json()["code"] == "AUTH_REVOKED"
    assert '<td class="revoked">revoked</td>' in (await client.get("/console/agents")).text


async def test_namespace_page_shows_keys_leases_history_and_checks_it(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    admin = {ADMIN_KEY_HEADER: settings.admin_key.get_secret_value()}
    body = {"tenant": "acme", "agent": "ledger", "namespaces": {"books": "write"}}
    token = (await client.post("/v1/agents", json=body, headers=admin)).json()["token"]
    headers = {"Authorization": f"Bearer {token}", "X-Conclave-Session": "s1"}
    assert (await client.put("/v1/state/books", json={}, headers=headers)).status_code < 300
    write = {"writes": [{"key": "balance", "value": 10}]}
    assert (await client.post("/v1/state/books/commit", json=write, headers=headers)).is_success
    lease = {"keys": ["balance"], "ttl_ms": 60_000}
    assert (await client.post("/v1/state/books/leases", json=lease, headers=headers)).is_success

    await _log_in(client, settings)
    listing = (await client.get("/console/namespaces")).text
    assert 'href="/console/namespaces/acme/books"' in listing
    page = (await client.get("/console/namespaces/acme/books")).text
    assert re.search(r"<td>balance</td><td>1</td><td>ledger</td>", page), page
    assert "&quot;balance&quot;" in page  # the history row names the key it wrote
    checked = await client.post(
        "/console/namespaces/acme/books/check", data={"form_token": _form_token(page)}
    )
    assert checked.status_code == 200
    assert "History check: serializable" in checked.text
    assert "1 commits over 1 keys checked" in checked.text


async def test_feed_pages_through_10000_records_a_window_at_a_time(
    client: httpx.AsyncClient, settings: Settings, redis: Redis
) -> None:
    audit = AuditLog(redis)
    record: dict[str, Any] = {
        "trace_id": "t", "tenant": "acme", "transport": "http", "operation": "echo",
        "tool": "echo", "outcome": "ok", "duration_ms": 1.0,
    }  # fmt: skip
    for start in range(0, 10_000, 1000):
        batch = [AuditRecord(at_ms=i, agent=f"a{i}", **record) for i in range(start, start + 1000)]
        await audit.append(*batch)
    await _log_in(client, settings)
    newest = (await client.get("/console/feed")).text
    assert newest.count("<tr>") == 51  # the header and one window of 50
    assert "<td>a9999</td>" in newest and "<td>a9950</td>" in newest
    assert "<td>a9949</td>" not in newest
    older = re.search(r'href="(/console/feed\?before=[0-9-]+)"', newest)
    assert older, newest
    second = (await client.get(older.group(1))).text
    assert "<td>a9949</td>" in second and "<td>a9950</td>" not in second
    assert "EventSource" not in second  # an older window stays still
    chains = await client.get("/console/chains")  # one trace, 2,000 records read, 20 shown
    assert chains.status_code == 200 and "trace t" in chains.text


async def test_the_feed_says_whom_a_call_was_made_for(
    client: httpx.AsyncClient, settings: Settings, redis: Redis
) -> None:
    """A call a worker made for other agents (the audit's chain) shows them beside it."""
    record: dict[str, Any] = {
        "trace_id": "t", "tenant": "acme", "transport": "http", "operation": "echo",
        "tool": "echo", "outcome": "ok", "duration_ms": 1.0,
    }  # fmt: skip
    now = int(time.time() * 1000)
    chained = AuditRecord(at_ms=now, agent="helper", chain=["t1/planner", "acme/lead"], **record)
    await AuditLog(redis).append(chained, AuditRecord(at_ms=now + 1, agent="alone", **record))
    await _log_in(client, settings)
    feed = (await client.get("/console/feed")).text
    assert f"<td>{html.escape('helper (for t1/planner -> acme/lead)')}</td>" in feed
    assert "<td>alone</td>" in feed


async def test_a_chain_shows_its_grants_and_the_time_left_to_its_deadline(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    token = await registered_token(
        client, admin_headers(settings), "acme", "chainer", tools=["echo"]
    )
    deadline_ms = int(time.time() * 1000) + 60_000
    headers = {
        "Authorization": f"Bearer {token}",
        DEADLINE_HEADER: str(deadline_ms),
        "traceparent": "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01",
    }
    for _ in range(2):
        answer = await client.post(
            "/v1/tools/echo/call", json={"arguments": {"message": "hi"}}, headers=headers
        )
        assert answer.status_code == 200, answer.text
    await _log_in(client, settings)
    page = (await client.get("/console/chains")).text
    assert "trace " + "ab" * 16 in page and "left to deadline ms" in page
    rows = re.findall(r"<tr><td>echo</td>(.*?)</tr>", page)
    assert len(rows) == 2
    for row in rows:
        cells = re.findall(r"<td>([^<]*)</td>", row)  # code, start, granted, took, elapsed, left
        granted, left = int(cells[2]), int(cells[5])
        assert 0 < granted <= 60_000 and 50_000 < left < 60_000


async def test_a_chain_shows_where_atba_hedged_a_call_and_which_attempt_won(
    client: httpx.AsyncClient, settings: Settings, redis: Redis
) -> None:
    record: dict[str, Any] = {
        "trace_id": "hedged", "tenant": "acme", "transport": "http", "outcome": "ok",
        "duration_ms": 90.0, "at_ms": int(time.time() * 1000),
    }  # fmt: skip
    hedged = {"decision": "hedge", "after_ms": 56, "started": True, "winner": "hedge"}
    waited = {"decision": "wait", "reason": "no room"}
    await AuditLog(redis).append(
        AuditRecord(operation="fetch", tool="fetch", hedge=hedged, **record),
        AuditRecord(operation="rank", tool="rank", hedge=waited, **record),
    )
    await _log_in(client, settings)
    page = (await client.get("/console/chains")).text
    assert "<th>hedge</th>" in page
    fetch = re.search(r"<tr><td>fetch</td>(.*?)</tr>", page)
    rank = re.search(r"<tr><td>rank</td>(.*?)</tr>", page)
    assert fetch and "<td>hedged at 56 ms, hedge won</td>" in fetch.group(1)
    assert rank and "hedged" not in rank.group(1)
