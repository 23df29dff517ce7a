"""A call's work does not grow with its tool's history (issue 39).

One tool is called 1,000 times through the in-process gateway, on a real Redis, with a latency
window that fills after 200 calls. What each call reads from Redis (the server's own count of
bytes it sent) and how many window members the gateway parses are counted, not timed: the
calls after the window is full cost no more than the calls while it was small.
"""

from __future__ import annotations

import anyio
import httpx
import pytest
from redis.asyncio import Redis

from gateway.budgets import AtbaAllocator, window_key
from gateway.config import Settings
from gateway.http import gateway_parts
from gateway.identity.tokens import issue_token
from gateway.pipeline import BudgetStage
from tests.helpers import in_process_gateway

pytestmark = pytest.mark.anyio

CALLS = 1_000
WINDOW = 200  # latency_window_max: full after this many calls


async def _sent_bytes(redis: Redis) -> int:
    return int((await redis.info("stats"))["total_net_output_bytes"])


def _allocator(client: httpx.AsyncClient) -> AtbaAllocator:
    app = client._transport.app  # type: ignore[attr-defined]
    [budget] = [s for s in gateway_parts(app).pipeline.stages if isinstance(s, BudgetStage)]
    assert isinstance(budget.allocator, AtbaAllocator)
    return budget.allocator


async def test_a_call_reads_and_parses_no_more_with_a_full_window(
    settings: Settings, redis: Redis
) -> None:
    limits = {"rate_limit_per_s": 1e6, "rate_limit_burst": 10**6}
    limits |= {"tenant_rate_limit_per_s": 1e6, "tenant_rate_limit_burst": 10**6}
    tuned = settings.model_copy(
        update={"sandbox_backend": "inprocess", "latency_window_max": WINDOW, **limits}
    )
    token = issue_token(tuned, tenant="acme", agent="a", scopes=["tool:echo"])
    headers = {"Authorization": f"Bearer {token}"}
    # Per stretch of calls: (Redis bytes sent, window members parsed), each per call.
    stretches: dict[str, tuple[float, float]] = {}
    async with in_process_gateway(tuned) as client:
        estimates = _allocator(client).estimates

        async def stretch(name: str, calls: int) -> None:
            sent, parsed = await _sent_bytes(redis), estimates.members_parsed
            for _ in range(calls):
                answer = await client.post(
                    "/v1/tools/echo/call", json={"arguments": {"message": "x"}}, headers=headers
                )
                assert answer.status_code == 200, answer.text
            # The INFO reply itself is counted once per stretch: a few KB over 100s of calls.
            sent_per_call = (await _sent_bytes(redis) - sent) / calls
            stretches[name] = (sent_per_call, (estimates.members_parsed - parsed) / calls)

        await stretch("young", 100)  # the window holds 0-100 samples
        await stretch("filling", WINDOW - 100)  # 100-200
        await stretch("full", CALLS - WINDOW)  # 200, every call trims one
    assert await redis.zcard(window_key("acme", "echo")) == WINDOW
    young, full = stretches["young"], stretches["full"]
    # Read in full on every call, a window of 200 samples is ~6 KB a call more than at 0-100.
    assert full[0] <= young[0] * 1.25 + 100, stretches
    # Parsed in full on every call, that is 200 members a call; held, about a tenth of it.
    assert full[1] <= 25, stretches
    assert full[1] <= young[1] * 3 + 5, stretches


async def test_concurrent_calls_read_a_full_window_no_more_than_one_call_does(
    settings: Settings, redis: Redis
) -> None:
    """16 callers at once, as under load: the calls admitted in one round trip must not each
    read the whole window (a third of the calls did, ~4 KB each, at 2,900 calls/s): the
    Redis bytes a call costs stay what they are for one caller at a time, within a margin."""
    limits = {"rate_limit_per_s": 1e6, "rate_limit_burst": 10**6}
    limits |= {"tenant_rate_limit_per_s": 1e6, "tenant_rate_limit_burst": 10**6}
    tuned = settings.model_copy(
        update={"sandbox_backend": "inprocess", "latency_window_max": WINDOW, **limits}
    )
    tokens = [
        issue_token(tuned, tenant="acme", agent=f"a{n}", scopes=["tool:echo"]) for n in range(16)
    ]
    body = {"arguments": {"message": "x"}}
    async with in_process_gateway(tuned) as client:

        async def calls(n: int, rounds: int) -> None:
            headers = {"Authorization": f"Bearer {tokens[n]}"}
            for _ in range(rounds):
                answer = await client.post("/v1/tools/echo/call", json=body, headers=headers)
                assert answer.status_code == 200, answer.text

        await calls(0, WINDOW + 50)  # the window full, one caller
        sent = await _sent_bytes(redis)
        await calls(0, 200)
        alone = (await _sent_bytes(redis) - sent) / 200
        sent = await _sent_bytes(redis)
        async with anyio.create_task_group() as group:
            for n in range(16):
                group.start_soon(calls, n, 25)
        together = (await _sent_bytes(redis) - sent) / 400
    # Every caller's admission reading 200 members when the window crossed its mark: ~1 KB
    # a call more than alone, here; one read a round trip: as alone.
    assert together <= alone * 1.3 + 100, (alone, together)
