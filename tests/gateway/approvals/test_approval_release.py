"""From an approval on one replica to the held call's answer on the other: p99 within
100 ms, the issue's goal (echo and both HTTP hops included). Serial: it times the gateway to
tens of milliseconds (tests/README.md)."""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path

import anyio
import httpx
import pytest
from redis.asyncio import Redis

from gateway.config import Settings
from tests.gateway.approvals.test_approvals import bearer_of, held_call, pending, two_replicas
from tests.helpers import until

pytestmark = [pytest.mark.anyio, pytest.mark.serial]


async def test_release_from_another_replica_is_quick(
    settings: Settings, redis: Redis, tmp_path: Path
) -> None:
    """From the approve request leaving to the held call's answer on the other replica:
    p99 within 100 ms (the issue's goal; the echo and both HTTP hops included)."""
    async with two_replicas(settings, tmp_path) as (a, b):
        caller = await bearer_of(a, settings, "payer", tools=["echo"])
        approver = await bearer_of(a, settings, "bob", approves=["echo"])
        released: list[float] = []
        for i in range(100):
            answers: list[httpx.Response] = []
            async with anyio.create_task_group() as group:
                group.start_soon(held_call, a, caller, {"message": f"pay {i:04d}"}, answers)
                [held] = await pending(b, approver)
                began = time.perf_counter()
                await b.post(f"/v1/approvals/{held['id']}/approve", headers=approver)
                await until(partial(bool, answers), 5.0, poll_s=0.001)
                released.append(time.perf_counter() - began)
            assert answers[0].status_code == 200
    released.sort()
    p50, p99 = released[len(released) // 2], released[98]  # nearest rank of 100
    print(f"release across replicas: p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms")
    assert p99 < 0.1, released
