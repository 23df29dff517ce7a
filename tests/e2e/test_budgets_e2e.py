"""Time budgets over real HTTP: refused before starting, killed and censored, the breaker."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import httpx
import pytest
from redis.asyncio import Redis

from conclave.stack import EmbeddedStack
from gateway.config import Settings

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.serial,
]  # timing-bound: run alone, after the parallel tiers (.ci/test)

BUDGET_SETTINGS: dict[str, Any] = {
    "tool_modules": ("tools.builtin", "tools.harness.faults"),
    "latency_min_samples": 3,
    "breaker_failures": 3,
    # Long enough that a loaded machine's three failures and the refused call fit in it.
    "breaker_cooldown_ms": 1_000,
}


@pytest.fixture(scope="module")
def stack(redis_url: str, sandbox_backend: str) -> Iterator[EmbeddedStack]:
    settings = Settings(
        redis_url=redis_url, port=0, sandbox_backend=sandbox_backend, **BUDGET_SETTINGS
    )
    with EmbeddedStack(settings) as running:
        yield running


@pytest.fixture
async def http(stack: EmbeddedStack, redis: Redis) -> AsyncIterator[httpx.AsyncClient]:
    """A client with a fresh agent's token; `redis` empties the store (windows, breakers)."""
    token = stack.token("acme", f"a{uuid.uuid4().hex[:10]}", ["tool:*"])
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=stack.url, headers=headers, timeout=10) as client:
        yield client


def _in_ms(ms: int) -> str:
    return str(int(time.time() * 1000) + ms)


async def _sleep_call(
    http: httpx.AsyncClient, median_ms: float, headers: dict[str, str] | None = None
) -> httpx.Response:
    arguments = {"distribution": "fixed", "median_ms": median_ms}
    return await http.post(
        "/v1/tools/heavy_tailed_sleep/call", json={"arguments": arguments}, headers=headers
    )


async def _latency(http: httpx.AsyncClient, tool: str) -> dict[str, Any]:
    response = await http.get(f"/v1/tools/{tool}/latency")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_a_call_that_cannot_fit_is_refused_before_it_starts(
    http: httpx.AsyncClient, stack: EmbeddedStack
) -> None:
    for _ in range(3):
        assert (await _sleep_call(http, 80)).status_code == 200
    learned = await _latency(http, "heavy_tailed_sleep")
    assert learned["source"] == "observed" and learned["p50_ms"] >= 80
    refused = await _sleep_call(http, 80, {"X-Conclave-Deadline": _in_ms(60)})
    assert refused.status_code == 504, refused.text
    error = refused.json()
    assert error["code"] == "BUDGET_EXHAUSTED" and error["action"] == "replan"
    assert error["details"]["p50_ms"] >= 80 and error["details"]["available_ms"] < 80
    # Nothing ran: no sample was added, and the audit has it refused at the budget stage.
    assert (await _latency(http, "heavy_tailed_sleep"))["samples"] == 3
    audit = await http.get(
        "/v1/audit", params={"code": "BUDGET_EXHAUSTED"}, headers=stack.admin_headers
    )
    record = next(r for r in audit.json() if r["trace_id"] == error["trace_id"])
    assert (record["outcome"], record["stage"], record["usage"]) == ("refused", "budget", None)


async def test_an_overrun_is_killed_at_its_grant_and_recorded_censored(
    http: httpx.AsyncClient, stack: EmbeddedStack
) -> None:
    assert (await _sleep_call(http, 1)).status_code == 200  # the agent's sandbox is warm
    deadline = int(_in_ms(300))
    began = time.monotonic()
    killed = await _sleep_call(http, 3_000, {"X-Conclave-Deadline": str(deadline)})
    took_ms = (time.monotonic() - began) * 1000
    assert killed.status_code == 504, killed.text
    error = killed.json()
    assert error["code"] == "TOOL_TIMEOUT"
    granted = error["details"]["granted_ms"]
    assert granted <= 300 and error["details"]["censored_sample_ms"] == granted
    assert took_ms < granted + 250  # answered at the grant, not after the tool's 3 s
    # The first kill (no overshoot measured yet) is answered by the deadline: the gateway's
    # own record says when (the client may read the answer later on a loaded machine).
    audit = await http.get(
        "/v1/audit", params={"code": "TOOL_TIMEOUT"}, headers=stack.admin_headers
    )  # the route stores this replica's records first
    record = next(r for r in audit.json() if r["trace_id"] == error["trace_id"])
    assert record["at_ms"] <= deadline
    window = await _latency(http, "heavy_tailed_sleep")
    assert window["samples"] == 2 and window["censored"] == 1


async def test_every_result_carries_its_grant_and_what_is_left(http: httpx.AsyncClient) -> None:
    headers = {
        "X-Conclave-Deadline": _in_ms(5_000),
        "X-Conclave-Plan": "echo,heavy_tailed_sleep",
        "X-Conclave-Reserve": "1000",
    }
    response = await http.post(
        "/v1/tools/echo/call", json={"arguments": {"message": "hi"}}, headers=headers
    )
    assert response.status_code == 200, response.text
    grant = response.json()["budget"]
    # No samples yet: nothing is known to keep back for the sleep after it, so echo may use
    # what is left of the ~4 s, up to its own declared timeout (2 s).
    assert grant["granted_ms"] == 2_000
    assert 3_000 < grant["remaining_ms"] <= 5_000
    plain = await http.post("/v1/tools/echo/call", json={"arguments": {"message": "hi"}})
    assert plain.json()["budget"]["granted_ms"] == 2_000  # no deadline: the declared timeout


async def _wait_for_breaker(http: httpx.AsyncClient, tool: str, state: str) -> None:
    with anyio.fail_after(5):
        while (await _latency(http, tool))["breaker"] != state:  # noqa: ASYNC110  polls HTTP
            await anyio.sleep(0.02)


async def test_the_breaker_opens_half_opens_and_closes(http: httpx.AsyncClient) -> None:
    key = uuid.uuid4().hex
    call = {"arguments": {"key": key, "failures": 3}}
    for _ in range(3):
        failed = await http.post("/v1/tools/flaky/call", json=call)
        assert failed.status_code == 503 and failed.json()["details"]["type"] == "ToolUnavailable"
    refused = await http.post("/v1/tools/flaky/call", json=call)
    assert refused.status_code == 503
    error = refused.json()
    assert error["details"]["breaker"] == "open" and error["action"] == "retry_backoff"
    assert 0 < error["retry_after_ms"] <= BUDGET_SETTINGS["breaker_cooldown_ms"]
    hurried = await http.post(
        "/v1/tools/flaky/call", json=call, headers={"X-Conclave-Deadline": _in_ms(100)}
    )
    assert hurried.json()["action"] == "switch_tool"  # the cool-down outlasts the deadline
    await _wait_for_breaker(http, "flaky", "half_open")
    probe = await http.post("/v1/tools/flaky/call", json=call)
    # The probe is the tool's 4th run: the refused calls never reached it.
    assert probe.status_code == 200 and probe.json()["result"] == 4
    assert (await _latency(http, "flaky"))["breaker"] == "closed"


async def test_a_failed_probe_opens_the_breaker_again(http: httpx.AsyncClient) -> None:
    for _ in range(3):
        assert (await http.post("/v1/tools/broken/call", json={})).status_code == 502
    await _wait_for_breaker(http, "broken", "half_open")
    probe = await http.post("/v1/tools/broken/call", json={})
    assert probe.json()["code"] == "TOOL_FAILED"
    again = await http.post("/v1/tools/broken/call", json={})
    assert again.json()["code"] == "UPSTREAM_UNAVAILABLE"
    assert again.json()["details"]["breaker"] == "open"
