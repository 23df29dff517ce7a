"""A budget plan is bounded before any work: a tenant's echo calls carrying a 60,000-name plan
(issue 26: two at a time took another tenant's echo median from 25 ms to 2 s) are refused
INVALID_REQUEST naming the limit, wherever the plan comes from (header, body, MCP `_meta`
via the same reader), and the victim tenant's calls keep their latency."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Iterator

import anyio
import httpx
import pytest

from conclave.stack import EmbeddedStack
from gateway.config import Settings

pytestmark = pytest.mark.anyio

HUGE_PLAN = [f"tool_{i:05d}" for i in range(60_000)]  # ~600 KB: under the body cap
VICTIM_MAX_S = 1.0  # the victim's slowest echo while the attack runs (alone: ~25 ms)


@pytest.fixture(scope="module")
def stack(redis_url: str) -> Iterator[EmbeddedStack]:
    settings = Settings(redis_url=redis_url, port=0, sandbox_backend="inprocess")
    with EmbeddedStack(settings) as running:
        yield running


@pytest.fixture
async def http(stack: EmbeddedStack) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=stack.url, timeout=30) as client:
        yield client


def _bearer(stack: EmbeddedStack, tenant: str) -> dict[str, str]:
    token = stack.token(tenant, f"a{uuid.uuid4().hex[:10]}", ["tool:echo"])
    return {"Authorization": f"Bearer {token}"}


def _deadline_ms() -> int:
    return int(time.time() * 1000) + 60_000


async def test_a_huge_plan_in_the_body_is_refused_and_the_victim_is_unaffected(
    http: httpx.AsyncClient, stack: EmbeddedStack
) -> None:
    attacker, victim = _bearer(stack, "attacker"), _bearer(stack, "victim")
    body = {
        "arguments": {"message": "x"},
        "budget": {"deadline_ms": _deadline_ms(), "plan": ["echo", *HUGE_PLAN]},
    }
    refusals: list[httpx.Response] = []
    victim_seconds: list[float] = []

    async def attack() -> None:
        for _ in range(4):
            refusals.append(await http.post("/v1/tools/echo/call", json=body, headers=attacker))

    async def victim_calls() -> None:
        for _ in range(10):
            started = time.perf_counter()
            ok = await http.post(
                "/v1/tools/echo/call", json={"arguments": {"message": "v"}}, headers=victim
            )
            victim_seconds.append(time.perf_counter() - started)
            assert ok.status_code == 200 and ok.json()["result"] == "v"

    async with anyio.create_task_group() as group:
        group.start_soon(attack)
        group.start_soon(attack)
        group.start_soon(victim_calls)

    assert len(refusals) == 8
    for refused in refusals:
        assert refused.status_code == 400, refused.text
        envelope = refused.json()
        assert envelope["code"] == "INVALID_REQUEST"
        assert envelope["param_hints"] == {"budget.plan": "at most 64 names, got 60001"}
    assert max(victim_seconds) < VICTIM_MAX_S, victim_seconds


async def test_a_plan_header_past_the_bound_is_refused_before_it_is_split(
    http: httpx.AsyncClient, stack: EmbeddedStack
) -> None:
    headers = {
        **_bearer(stack, "attacker"),
        "X-Conclave-Deadline": str(_deadline_ms()),
        "X-Conclave-Plan": ",".join(["echo", *HUGE_PLAN[:2000]]),
    }
    refused = await http.post(
        "/v1/tools/echo/call", json={"arguments": {"message": "x"}}, headers=headers
    )
    assert refused.status_code == 400, refused.text
    assert refused.json()["code"] == "INVALID_REQUEST"
    assert refused.json()["param_hints"] == {"X-Conclave-Plan": "at most 64 names of 64 characters"}


async def test_a_plan_name_longer_than_a_tool_name_is_refused(
    http: httpx.AsyncClient, stack: EmbeddedStack
) -> None:
    body = {
        "arguments": {"message": "x"},
        "budget": {"deadline_ms": _deadline_ms(), "plan": ["echo", "n" * 65]},
    }
    refused = await http.post("/v1/tools/echo/call", json=body, headers=_bearer(stack, "t"))
    assert refused.status_code == 400, refused.text
    assert refused.json()["param_hints"] == {
        "budget.plan": "each name at most 64 characters, got 65"
    }


async def test_a_plan_at_the_bound_is_served(http: httpx.AsyncClient, stack: EmbeddedStack) -> None:
    body = {
        "arguments": {"message": "fits"},
        "budget": {"deadline_ms": _deadline_ms(), "plan": ["echo", *HUGE_PLAN[:63]]},
    }
    ok = await http.post("/v1/tools/echo/call", json=body, headers=_bearer(stack, "t"))
    assert ok.status_code == 200, ok.text
    assert ok.json()["result"] == "fits"


async def test_a_huge_plan_in_mcp_meta_is_refused(
    http: httpx.AsyncClient, stack: EmbeddedStack
) -> None:
    call = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {
            "name": "echo",
            "arguments": {"message": "x"},
            "_meta": {"conclave/deadline_ms": _deadline_ms(), "conclave/plan": HUGE_PLAN},
        },
    }
    headers = {**_bearer(stack, "attacker"), "Accept": "application/json, text/event-stream"}
    answer = await http.post("/mcp", json=call, headers=headers)
    assert answer.status_code == 200, answer.text
    result = answer.json()["result"]
    assert result["isError"] is True
    envelope = result["_meta"]["conclave/error"]  # echo declares an outputSchema
    assert envelope["code"] == "INVALID_REQUEST"
    assert envelope["param_hints"] == {"_meta.conclave/plan": "at most 64 names, got 60000"}
