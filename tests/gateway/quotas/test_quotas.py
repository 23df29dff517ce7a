"""Quotas through two gateway replicas (issue 42): 64 concurrent callers are granted exactly
the quota, never once more, in 20 runs; a refusal is 429 naming the quota with
`retry_after_ms`, decided before dispatch (no sandbox touched); `GET /v1/quotas` shows use
and what remains."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx
import pytest
from redis.asyncio import Redis

from gateway.config import Settings
from tests.helpers import admin_headers, in_process_replicas, registered_token, until_true

pytestmark = pytest.mark.anyio

QUOTAS = """
[[quota]]
name = "daily-echo"
tools = ["echo"]
calls_per_day = 17

[[quota]]
name = "per-agent"
tenants = ["slow"]
per = ["agent"]
calls_per_min = 2
"""


@asynccontextmanager
async def two_replicas(
    settings: Settings, tmp_path: Path
) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    config = tmp_path / "conclave.toml"
    config.write_text(QUOTAS)
    settings = settings.model_copy(
        update={
            "config": config,
            "sandbox_backend": "inprocess",
            "rate_limit_burst": 10_000,
            "tenant_in_flight_max": 1000,
        }
    )
    async with in_process_replicas(settings) as (first, second):
        yield first, second


async def _bearer(
    client: httpx.AsyncClient, settings: Settings, tenant: str, agent: str
) -> dict[str, str]:
    admin = admin_headers(settings)
    token = await registered_token(client, admin, tenant, agent, tools=["echo"])
    return {"Authorization": f"Bearer {token}"}


async def _echo(client: httpx.AsyncClient, headers: dict[str, str]) -> httpx.Response:
    return await client.post("/v1/tools/echo/call", json={"arguments": {"message": "hi"}},
                             headers=headers)  # fmt: skip


async def test_64_concurrent_callers_on_two_replicas_get_exactly_the_quota(
    settings: Settings, redis: Redis, tmp_path: Path
) -> None:
    async with two_replicas(settings, tmp_path) as (a, b):
        for _ in range(20):
            tenant = f"t{uuid.uuid4().hex[:8]}"  # a new day's count for each run
            callers = [await _bearer(a, settings, tenant, f"bot{i}") for i in range(4)]
            answers: list[httpx.Response] = []

            async def call(client: httpx.AsyncClient, headers: dict[str, str],
                           answers: list[httpx.Response]) -> None:  # fmt: skip
                answers.append(await _echo(client, headers))

            async with anyio.create_task_group() as group:
                for i in range(64):
                    group.start_soon(call, (a, b)[i % 2], callers[i % 4], answers)
            codes = sorted(r.status_code for r in answers)
            assert codes == [200] * 17 + [429] * 47, codes
            refused = next(r.json() for r in answers if r.status_code == 429)
            assert refused["code"] == "RATE_LIMITED" and refused["retryable"] is True
            assert refused["details"]["quota"] == "daily-echo"
            assert refused["details"]["limit"] == "calls_per_day"
            assert refused["retry_after_ms"] > 0


async def test_a_refused_call_names_its_quota_touches_no_sandbox_and_quotas_show_use(
    settings: Settings, redis: Redis, tmp_path: Path
) -> None:
    async with two_replicas(settings, tmp_path) as (a, b):
        bot = await _bearer(a, settings, "slow", "bot")
        assert (await _echo(a, bot)).status_code == 200
        assert (await _echo(b, bot)).status_code == 200
        refused = await _echo(a, bot)
        assert refused.status_code == 429
        body = refused.json()
        assert body["details"]["quota"] == "per-agent" and body["details"]["subject"] == "slow/bot"
        assert 0 < body["retry_after_ms"] <= 60_000
        assert "quota 'per-agent' of slow/bot has used 2 of its 2 calls" in body["message"]
        shown = (await b.get("/v1/quotas", headers=bot)).json()["quotas"]
        by_limit = {(q["quota"], q["limit"]): q for q in shown}
        assert by_limit["per-agent", "calls_per_min"]["remaining"] == 0
        assert by_limit["daily-echo", "calls_per_day"]["used"] == 2  # the refused one is not
        assert by_limit["daily-echo", "calls_per_day"]["remaining"] == 15

        async def refused_record() -> list[dict[str, object]]:
            path = "/v1/audit?tenant=slow&code=RATE_LIMITED"
            records: list[dict[str, object]] = (
                await a.get(path, headers=admin_headers(settings))
            ).json()
            return records

        [record] = await until_true(refused_record, 5.0)
        assert record["stage"] == "quota" and record["usage"] is None  # dispatch never ran
