"""No stranger can push a tenant's audit records out (issue 26): the audit is one stream per
tenant, unauthenticated refusals go to their own bounded stream, and `GET /v1/audit` reads one
tenant's stream by time.

The attack: the audit was one stream trimmed by count, so a flood of unauthenticated refusals
(each one audited) pushed a victim's records out, and `/v1/audit` scanned only its newest
10,000 records anyway.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from gateway.assembly import create_app
from gateway.config import Settings
from gateway.identity.tokens import issue_token

pytestmark = pytest.mark.anyio

CAP = 100  # records each audit stream keeps (about: trimmed by whole stream nodes)


@pytest.fixture
async def gateway(
    redis_url: str, redis: Redis
) -> AsyncIterator[tuple[httpx.AsyncClient, Settings]]:
    settings = Settings(
        redis_url=redis_url,
        port=0,
        sandbox_backend="process",
        audit_stream_max=CAP,
        http_unauthenticated_per_s=10_000,  # the flood's refusals unpaced: this is the audit
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as c:
            yield c, settings


async def _audit(
    client: httpx.AsyncClient, settings: Settings, **params: Any
) -> list[dict[str, Any]]:
    admin = {"X-Conclave-Admin-Key": settings.admin_key.get_secret_value()}
    response = await client.get("/v1/audit", params={"limit": 1000, **params}, headers=admin)
    assert response.status_code == 200, response.text
    records: list[dict[str, Any]] = response.json()
    return records


async def _echo(client: httpx.AsyncClient, headers: dict[str, str], message: str) -> str:
    trace_id = uuid.uuid4().hex
    call = {"arguments": {"message": message}}
    traced = {**headers, "traceparent": f"00-{trace_id}-{'1' * 16}-01"}
    response = await client.post("/v1/tools/echo/call", json=call, headers=traced)
    assert response.status_code == 200 and response.json()["result"] == message, response.text
    return trace_id


def _ms(record: dict[str, Any]) -> int:
    return int(record["id"].split("-")[0])


async def test_a_flood_of_unauthenticated_refusals_does_not_push_a_tenants_records_out(
    gateway: tuple[httpx.AsyncClient, Settings],
) -> None:
    client, settings = gateway
    token = issue_token(settings, tenant="good", agent="victim", scopes=["tool:*"])
    victim = {"Authorization": f"Bearer {token}"}
    traces = [await _echo(client, victim, f"call {i}") for i in range(3)]
    for i in range(5 * CAP):  # every one of them refused, and audited
        refused = await client.post(
            "/v1/tools/echo/call",
            json={"arguments": {"message": "x"}},
            headers={"Authorization": f"Bearer forged.{i}.token"},
        )
        assert refused.status_code == 401, refused.text
    mine = await _audit(client, settings, tenant="good")
    assert [r["trace_id"] for r in mine] == traces[::-1]  # newest first, none pushed out
    assert {(r["tenant"], r["agent"], r["outcome"]) for r in mine} == {("good", "victim", "ok")}
    # The refusals are kept in their own stream, bounded like every other.
    strangers = await _audit(client, settings, tenant="")
    assert CAP <= len(strangers) <= CAP + 100
    assert {(r["tenant"], r["code"]) for r in strangers} == {("", "AUTH_INVALID")}
    # The feed of everyone's newest records (what the console shows) is bounded too, and the
    # flood did push the victim out of it: only its own stream keeps its records.
    feed = await _audit(client, settings)
    assert len(feed) <= CAP + 100 and not set(traces) & {r["trace_id"] for r in feed}


async def test_the_audit_reads_a_tenants_records_by_time(
    gateway: tuple[httpx.AsyncClient, Settings],
) -> None:
    client, settings = gateway
    headers = {}
    for tenant in ("good", "other"):
        token = issue_token(settings, tenant=tenant, agent="a", scopes=["tool:*"])
        headers[tenant] = {"Authorization": f"Bearer {token}"}
    for i in range(6):
        await _echo(client, headers["good"], f"good {i}")
        await _echo(client, headers["other"], f"other {i}")
    records = await _audit(client, settings, tenant="good")
    assert len(records) == 6 and {r["tenant"] for r in records} == {"good"}
    middle = _ms(records[2])
    since, until = middle, _ms(records[1])
    window = await _audit(client, settings, tenant="good", since_ms=since, until_ms=until)
    expected = [r for r in records if since <= _ms(r) <= until]
    assert [r["id"] for r in window] == [r["id"] for r in expected]
    assert 2 <= len(window) < len(records)
    # Filters apply within the window; a window before every record is empty.
    assert await _audit(client, settings, tenant="good", until_ms=_ms(records[-1]) - 1) == []
    oks = await _audit(client, settings, tenant="good", since_ms=since, outcome="ok", limit=1)
    assert [r["id"] for r in oks] == [records[0]["id"]]
