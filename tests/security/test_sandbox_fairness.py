"""Attack: one tenant holds slow calls on as many sandboxes as it can get.

Without per-tenant shares, a flood of slow calls takes every sandbox under the global cap and
every other tenant gets SANDBOX_UNAVAILABLE. With them, the flooding tenant holds at most
its share (half the cap), its other calls wait in the queue and are then refused with a
retryable SANDBOX_UNAVAILABLE, and the victim's calls all succeed while the flood goes on.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import anyio
import httpx
import pytest

from gateway.assembly import create_app
from gateway.config import Settings
from gateway.identity.tokens import issue_token

pytestmark = pytest.mark.anyio

POOL_MAX = 4  # tenant share 2, agent share 1
FLOOD_AGENTS = 4
FLOOD_SECONDS = 10.0


@pytest.fixture(params=["docker", "bwrap"])
def fairness_settings(request: pytest.FixtureRequest, redis_url: str) -> Settings:
    request.getfixturevalue("docker_engine" if request.param == "docker" else "bwrap_available")
    return Settings(
        redis_url=redis_url,
        port=0,
        sandbox_backend=request.param,
        sandbox_pool_max=POOL_MAX,
        tool_modules=("tools.builtin", "tools.harness.misbehaving"),
    )


@pytest.fixture
async def gateway(fairness_settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(fairness_settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://localhost", timeout=60
        ) as client:
            yield client


def _bearer(settings: Settings, tenant: str, agent: str) -> dict[str, str]:
    token = issue_token(settings, tenant=tenant, agent=agent, scopes=["tool:*"])
    return {"Authorization": f"Bearer {token}"}


async def test_a_flooding_tenant_cannot_take_the_victims_sandboxes(
    fairness_settings: Settings, gateway: httpx.AsyncClient
) -> None:
    flood: list[tuple[httpx.Response, float]] = []
    victim: list[httpx.Response] = []
    first_refusal = anyio.Event()

    async def slow_call(agent: str) -> None:
        began = time.monotonic()
        answer = await gateway.post(
            "/v1/tools/sleep/call",
            json={"arguments": {"seconds": FLOOD_SECONDS}},
            headers=_bearer(fairness_settings, "noisy", agent),
        )
        flood.append((answer, time.monotonic() - began))
        if answer.status_code != 200:
            first_refusal.set()

    async def victim_calls(agent: str) -> None:
        for i in range(3):
            answer = await gateway.post(
                "/v1/tools/echo/call",
                json={"arguments": {"message": f"{agent}-{i}"}},
                headers=_bearer(fairness_settings, "victim", agent),
            )
            victim.append(answer)

    async with anyio.create_task_group() as group:
        for i in range(FLOOD_AGENTS):
            for _ in range(2):
                group.start_soon(slow_call, f"noisy-{i}")
        with anyio.fail_after(60):
            await first_refusal.wait()  # the flood holds every sandbox it can get by now
        async with anyio.create_task_group() as victims:
            for agent in ("v-0", "v-1"):
                victims.start_soon(victim_calls, agent)
        flood_still_on = sum(answer.status_code == 200 for answer, _ in flood) == 0

    assert [answer.status_code for answer in victim] == [200] * 6, [r.text for r in victim]
    assert flood_still_on  # the victim's calls all ran while the flood held its sandboxes
    held = [answer for answer, _ in flood if answer.status_code == 200]
    refused = [(answer, waited) for answer, waited in flood if answer.status_code != 200]
    assert len(held) == POOL_MAX // 2  # the flooding tenant's share, and no more
    for answer, waited in refused:
        error = answer.json()
        assert answer.status_code == 503 and error["code"] == "SANDBOX_UNAVAILABLE", error
        assert error["retryable"] and error["retry_after_ms"] > 0
        assert "CONCLAVE_SANDBOX_TENANT_MAX" in error["message"]
        assert waited >= fairness_settings.sandbox.queue_ms / 1000  # after the queue wait
