"""Attack: one tenant floods two replicas with concurrent slow tool calls (issue 26).

Before the per-tenant in-flight cap, every slow call the flood sent was started: on the
in-process executor each held one of the process's worker threads, so a victim tenant's own
call waited for one to come free, the flood's whole length. With the cap, counted in Redis
across both replicas, the flood runs at most `IN_FLIGHT_MAX` calls at once, the rest are
refused at once with a retryable RATE_LIMITED naming the cap, and the victim's calls keep
their speed. A replica that dies with places taken loses them only for the places' hold.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack

import anyio
import httpx
import pytest
from redis.asyncio import Redis

from gateway.budgets import Admission, InFlight, in_flight_key
from gateway.config import Settings
from gateway.identity.tokens import issue_token
from tests.helpers import in_process_gateway, until, until_true

pytestmark = pytest.mark.anyio

IN_FLIGHT_MAX = 6
FLOOD_PER_REPLICA = 45  # 90 in all: more than the process's 40 worker threads
FLOOD_SLEEP_S = 4.0
VICTIM_MAX_S = 1.0  # the victim's slowest call during the flood (alone: a few ms)


@pytest.fixture
def settings(redis_url: str) -> Settings:
    return Settings(
        redis_url=redis_url,
        port=0,
        sandbox_backend="inprocess",
        tool_modules=("tools.builtin", "tools.harness.misbehaving"),
        tenant_in_flight_max=IN_FLIGHT_MAX,
        secret="in-flight-suite-secret-" + "x" * 32,
    )


@pytest.fixture
async def replicas(settings: Settings, redis: Redis) -> AsyncIterator[list[httpx.AsyncClient]]:
    """Two gateways on one Redis, as `--workers 2` or two hosts would be."""
    async with AsyncExitStack() as stack:
        yield [
            await stack.enter_async_context(in_process_gateway(settings, "http://localhost"))
            for _ in range(2)
        ]


def _bearer(settings: Settings, tenant: str, agent: str) -> dict[str, str]:
    token = issue_token(settings, tenant=tenant, agent=agent, scopes=["tool:*"])
    return {"Authorization": f"Bearer {token}"}


async def test_a_flood_of_slow_calls_is_capped_across_replicas_and_the_victim_keeps_its_speed(
    settings: Settings, replicas: list[httpx.AsyncClient], redis: Redis
) -> None:
    flood: list[tuple[httpx.Response, float]] = []
    victim: list[tuple[httpx.Response, float]] = []

    async def slow_call(gateway: httpx.AsyncClient, agent: str) -> None:
        began = time.monotonic()
        answer = await gateway.post(
            "/v1/tools/sleep/call",
            json={"arguments": {"seconds": FLOOD_SLEEP_S}},
            headers=_bearer(settings, "noisy", agent),
            timeout=30,
        )
        flood.append((answer, time.monotonic() - began))

    async def victim_calls(gateway: httpx.AsyncClient) -> None:
        for i in range(5):
            began = time.monotonic()
            answer = await gateway.post(
                "/v1/tools/sleep/call",
                json={"arguments": {"seconds": 0.01}},
                headers=_bearer(settings, "victim", f"v-{i}"),
                timeout=30,
            )
            victim.append((answer, time.monotonic() - began))

    async with anyio.create_task_group() as group:
        for i in range(FLOOD_PER_REPLICA):
            for r, gateway in enumerate(replicas):
                group.start_soon(slow_call, gateway, f"noisy-{r}-{i % 8}")
        # The flood's refusals are in, its admitted calls hold their places.
        await until(lambda: len(flood) >= 2 * FLOOD_PER_REPLICA - IN_FLIGHT_MAX, 20)
        held = await redis.zcard(in_flight_key("noisy"))
        assert held == IN_FLIGHT_MAX, [answer.text for answer, _ in flood[:2]]
        for gateway in replicas:
            await victim_calls(gateway)
        flood_still_on = len(flood) < 2 * FLOOD_PER_REPLICA

    assert flood_still_on  # the victim's calls all ran while the flood held its places
    assert [a.status_code for a, _ in victim] == [200] * 10, [a.text for a, _ in victim]
    slowest = max(seconds for _, seconds in victim)
    assert slowest < VICTIM_MAX_S, f"the victim's slowest call took {slowest:.2f} s"
    ran = [answer for answer, _ in flood if answer.status_code == 200]
    refused = [(answer, waited) for answer, waited in flood if answer.status_code != 200]
    assert len(ran) == IN_FLIGHT_MAX  # across both replicas, not per replica
    for answer, waited in refused:
        error = answer.json()
        assert answer.status_code == 429 and error["code"] == "RATE_LIMITED", error
        assert error["retryable"] and error["retry_after_ms"] > 0
        assert error["details"] == {"limited_by": "tenant_in_flight", "in_flight_max": 6}
        assert "CONCLAVE_TENANT_IN_FLIGHT_MAX" in error["message"]
        assert waited < FLOOD_SLEEP_S  # refused at admission, not after a wait
    assert await redis.zcard(in_flight_key("noisy")) == 0  # every place given back

    # Once the flood is over, the tenant runs calls again.
    again = await replicas[0].post(
        "/v1/tools/echo/call",
        json={"arguments": {"message": "after"}},
        headers=_bearer(settings, "noisy", "noisy-0-0"),
    )
    assert again.status_code == 200, again.text


async def test_a_place_a_dead_replica_never_gave_back_lapses_after_its_hold(redis: Redis) -> None:
    admission = Admission(redis, 100.0, 100, in_flight_max=1)
    lost = InFlight("held-by-a-replica-that-died", hold_ms=300)
    first = await admission.admit("t", "a", 0, "sleep", in_flight=lost)
    assert first.allowed
    refused = await admission.admit("t", "a", 0, "sleep", in_flight=InFlight("next", 300))
    assert not refused.allowed and refused.limited_by == "in_flight"
    assert refused.retry_after_ms > 0
    other_tenant = await admission.admit("u", "a", 0, "sleep", in_flight=InFlight("u1", 300))
    assert other_tenant.allowed  # the cap is the tenant's own
    began = time.monotonic()
    while not (await admission.admit("t", "a", 0, "sleep", in_flight=InFlight("n", 300))).allowed:
        assert time.monotonic() - began < 5, "the lost place never lapsed"
        await anyio.sleep(0.05)
    assert time.monotonic() - began >= 0.2


async def test_a_place_redis_cannot_take_back_still_leaves_the_calls_audit(
    settings: Settings, redis: Redis
) -> None:
    """The account stage writes the call's audit record before it gives the place back, and
    a Redis error giving it back (the place lapses on its own) loses neither the record nor
    the answer."""
    admin = {"X-Conclave-Admin-Key": settings.admin_key.get_secret_value()}
    tenant = f"lossy-{time.monotonic_ns()}"
    async with in_process_gateway(settings, "http://localhost") as gateway:

        async def slow_call() -> None:
            answers.append(
                await gateway.post(
                    "/v1/tools/sleep/call",
                    json={"arguments": {"seconds": 0.5}},
                    headers=_bearer(settings, tenant, "a"),
                    timeout=30,
                )
            )

        answers: list[httpx.Response] = []
        async with anyio.create_task_group() as group:
            group.start_soon(slow_call)
            await until_true(lambda: redis.zcard(in_flight_key(tenant)), 10)
            # The place's sorted set becomes a string: giving the place back fails (WRONGTYPE).
            await redis.set(in_flight_key(tenant), "not a sorted set")
        assert answers[0].status_code == 200, answers[0].text

        async def audited() -> list[dict[str, object]]:
            found = await gateway.get("/v1/audit", params={"tenant": tenant}, headers=admin)
            assert found.status_code == 200, found.text
            records: list[dict[str, object]] = found.json()
            return records

        records = await until_true(audited, 10)
        assert [(r["tool"], r["outcome"]) for r in records] == [("sleep", "ok")]
