"""Attack: a stranger sends requests without a valid token as fast as they are answered
(issue 26, "stranger floods the audit").

Before the pacing, every 401 was answered at once: four connections made ~800 refusals a
second, most of a core of the gateway every tenant shares. Now a client address's 401s come
no faster than `http_unauthenticated_per_s` (a burst of twice that): each is still answered
with its SERF envelope, later, and a tenant calling with its token meanwhile is not paced.
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

# The victim's slowest call is bounded in wall time (VICTIM_MAX_S): alone on the machine. In
# the parallel pass of a CI run on a 2-core machine twice as slow as before, another worker's
# load stalled one victim call 1.85 s (the test passes alone, 3 of 3).
pytestmark = [pytest.mark.anyio, pytest.mark.serial]

PER_S = 20.0  # the stranger's 401s a second, after a burst of 40
STRANGERS = 4
REFUSALS = 100  # 40 at once, the other 60 at 20 a second: about 3 s
VICTIM_MAX_S = 0.5  # the victim's slowest call meanwhile (unpaced: milliseconds)


@pytest.fixture
async def gateway(redis_url: str) -> AsyncIterator[tuple[httpx.AsyncClient, Settings]]:
    settings = Settings(
        redis_url=redis_url,
        port=0,
        sandbox_backend="inprocess",
        http_unauthenticated_per_s=PER_S,
        tenant_rate_limit_per_s=10_000,
        tenant_rate_limit_burst=10_000,
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, client=("198.51.100.7", 4242))
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as c:
            yield c, settings


async def test_a_strangers_refusals_are_paced_and_a_tenants_calls_are_not(
    gateway: tuple[httpx.AsyncClient, Settings],
) -> None:
    client, settings = gateway
    token = issue_token(settings, tenant="good", agent="victim", scopes=["tool:*"])
    victim = {"Authorization": f"Bearer {token}"}
    codes: list[str] = []
    victim_s: list[float] = []
    done = anyio.Event()

    async def stranger(share: int) -> None:
        for _ in range(share):
            refused = await client.post("/v1/tools/echo/call", json={"arguments": {}})
            assert refused.status_code == 401
            codes.append(refused.json()["code"])

    async def victim_calls() -> None:
        while not done.is_set():
            began = time.monotonic()
            answer = await client.post(
                "/v1/tools/echo/call", json={"arguments": {"message": "hi"}}, headers=victim
            )
            assert answer.status_code == 200, answer.text
            victim_s.append(time.monotonic() - began)
            await anyio.sleep(0.05)

    # The victim's first call, before the flood: its one-time work (the app's first tool call:
    # Redis scripts loaded, models built) is not pacing, and took up to 0.9 s under CI's load.
    warm = await client.post(
        "/v1/tools/echo/call", json={"arguments": {"message": "hi"}}, headers=victim
    )
    assert warm.status_code == 200, warm.text
    began = time.monotonic()
    async with anyio.create_task_group() as group:
        group.start_soon(victim_calls)
        async with anyio.create_task_group() as strangers:
            for _ in range(STRANGERS):
                strangers.start_soon(stranger, REFUSALS // STRANGERS)
        elapsed = time.monotonic() - began
        done.set()
    assert codes == ["AUTH_REQUIRED"] * REFUSALS  # every one refused with its SERF
    # No faster than the bucket: the 60 past the burst took 3 s (unpaced: well under 1 s).
    assert elapsed >= (REFUSALS - 2 * PER_S) / PER_S - 0.2, elapsed
    assert len(victim_s) >= 10 and max(victim_s) < VICTIM_MAX_S, victim_s
