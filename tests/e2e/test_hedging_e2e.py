"""Hedged attempts over real HTTP, on each sandbox backend (docs/concepts.md, "ATBA").

The tools are `tools.harness.hedging`'s: a first attempt sleeps as long as asked, a hedge
(the gateway's second attempt, marked in its context) as long as asked of it, each in a
`sleep` process whose command line holds the call's marker, so the test sees an attempt's
processes on this machine. Each test uses a fresh agent, which earns its hedges by its own
calls first: `WARM_CALLS` quick calls earn one hedge at the 5% default share, and fill the
tool's latency window (its p95, where a hedge starts, is then tens of ms). The warm-up runs
in two streams, so the agent holds two warm sandboxes: the hedge does not wait for a start.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest
from redis.asyncio import Redis

from conclave.bench.core import processes_with
from conclave.stack import EmbeddedStack
from gateway.budgets import HedgeBudget
from gateway.config import Settings
from tests.helpers import until

# serial: timing-bound (a hedge starts tens of ms into a call; answers are timed against a
# deadline), so .ci/test runs it alone after the parallel pass.
pytestmark = [pytest.mark.anyio, pytest.mark.serial]

AGENT_SHARE = 5  # sandboxes an agent may hold at once
REPLY_TOLERANCE_MS = 40  # what the reply may add after the deadline: one local HTTP exchange
WARM_CALLS = 20  # at a 5% share, one hedge earned
WARM_MS = 10  # a warm-up call's sleep: the tool's p95 above a hedge's start
GONE_WITHIN_S = 5.0


@pytest.fixture(scope="module")
def stack(redis_url: str, sandbox_backend: str) -> Iterator[EmbeddedStack]:
    settings = Settings(
        redis_url=redis_url,
        port=0,
        sandbox_backend=sandbox_backend,
        tool_modules=("tools.builtin", "tools.harness.hedging"),
        sandbox_agent_max=AGENT_SHARE,
        rate_limit_per_s=100.0,
        rate_limit_burst=100,
    )
    with EmbeddedStack(settings) as running:
        yield running


def _tenant(agent: str) -> str:
    return f"t-{agent}"


def _marker() -> str:
    return f"{random.randrange(10**11, 10**12)}"


def _client(stack: EmbeddedStack, agent: str) -> httpx.AsyncClient:
    """A client of `agent`, alone in its tenant: latency windows are per tenant and tool, so
    no other test's calls move where its hedges start."""
    token = stack.token(_tenant(agent), agent, ["tool:*"])
    headers = {"Authorization": f"Bearer {token}"}
    return httpx.AsyncClient(base_url=stack.url, headers=headers, timeout=60)


async def _call(
    http: httpx.AsyncClient,
    tool: str,
    marker: str,
    first_ms: int,
    hedge_ms: int = 0,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    arguments = {"marker": marker, "first_ms": first_ms, "hedge_ms": hedge_ms}
    return await http.post(f"/v1/tools/{tool}/call", json={"arguments": arguments}, headers=headers)


async def _warm_up(http: httpx.AsyncClient, tool: str, first_ms: int = WARM_MS) -> None:
    """`WARM_CALLS` calls of `first_ms` in two streams: one hedge earned, two sandboxes warm.
    The calls take ~10 ms: a quick call measured 2-5 ms, and on a fast run the tool's p95
    fell under a hedge's start (`HEDGE_START_MS`), below which no call of it is hedged."""

    async def stream() -> None:
        for _ in range(WARM_CALLS // 2):
            answer = await _call(http, tool, _marker(), first_ms)
            assert answer.status_code == 200, answer.text

    async with anyio.create_task_group() as group:
        group.start_soon(stream)
        group.start_soon(stream)


async def _audit(stack: EmbeddedStack, agent: str, tool: str) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(base_url=stack.url, timeout=30) as http:
        found = await http.get(
            "/v1/audit",
            params={"agent": agent, "tool": tool, "limit": 1000},
            headers=stack.admin_headers,
        )
    assert found.status_code == 200, found.text
    records: list[dict[str, Any]] = found.json()
    return records


async def _gone(marker: str) -> None:
    await until(lambda: not processes_with(marker), GONE_WITHIN_S)


async def test_a_slow_first_attempt_loses_to_a_fast_hedge_and_is_killed(
    stack: EmbeddedStack, redis: Redis
) -> None:
    agent = f"h{uuid.uuid4().hex[:8]}"
    marker = _marker()
    async with _client(stack, agent) as http:
        # Calls of ~10 ms: a tool whose p95 is under a hedge's own start (5 ms) is not hedged
        # (`hedge_rule.HEDGE_START_MS`), and quick calls of this one measured 2-5 ms.
        await _warm_up(http, "slow_first")
        began = time.monotonic()
        answer = await _call(http, "slow_first", marker, first_ms=30_000)
        took = time.monotonic() - began
        assert answer.status_code == 200, answer.text
        body = answer.json()
        # The hedge answered; what the first attempt wrote in its own workspace is not in
        # the winner's: each attempt ran in a sandbox of its own.
        assert body["result"] == {"attempt": "hedge", "files": [f"{marker}-hedge"]}
        assert body["budget"]["hedged"] is True and body["budget"]["hedge_won"] is True
        assert took < 15, f"the hedged call took {took:.1f} s"
        await _gone(marker)  # the first attempt's sleep, killed with its call
        latency = (await http.get("/v1/tools/slow_first/latency")).json()
    assert latency["censored"] >= 1  # the loser's time, recorded as a lower bound
    audited = await _audit(stack, agent, "slow_first")
    (record,) = [r for r in audited if r["hedge"].get("started")]
    assert record["hedge"]["decision"] == "hedge" and record["hedge"]["winner"] == "hedge"
    assert record["hedge"]["loser_ms"] > 0
    assert await HedgeBudget(redis).counts(_tenant(agent), agent) == (WARM_CALLS + 1, 1)


async def test_a_tool_not_declared_idempotent_is_never_hedged(
    stack: EmbeddedStack, redis: Redis
) -> None:
    agent = f"n{uuid.uuid4().hex[:8]}"
    marker = _marker()
    async with _client(stack, agent) as http:
        await _warm_up(http, "slow_first_unsafe")
        began = time.monotonic()
        answer = await _call(http, "slow_first_unsafe", marker, first_ms=1_500)
        took = time.monotonic() - began
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["result"] == {"attempt": "first", "files": [f"{marker}-first"]}
    assert body["budget"]["hedged"] is False
    assert took >= 1.5
    records = await _audit(stack, agent, "slow_first_unsafe")
    assert len(records) == WARM_CALLS + 1 and all(r["hedge"] is None for r in records)
    assert (await HedgeBudget(redis).counts(_tenant(agent), agent))[1] == 0


async def test_the_hedge_budget_holds_under_a_burst(stack: EmbeddedStack, redis: Redis) -> None:
    """Three slow calls at once, with one hedge earned: one hedge starts, though the agent's
    sandbox share had room for more."""
    agent = f"b{uuid.uuid4().hex[:8]}"
    markers = [_marker() for _ in range(3)]
    answers: list[httpx.Response] = []
    async with _client(stack, agent) as http:
        await _warm_up(http, "slow_first")

        async def slow(marker: str) -> None:
            answers.append(await _call(http, "slow_first", marker, first_ms=3_000))

        async with anyio.create_task_group() as group:
            for marker in markers:
                group.start_soon(slow, marker)
    assert all(a.status_code == 200 for a in answers), [a.text for a in answers]
    hedged = [a.json() for a in answers if a.json()["budget"]["hedged"]]
    assert len(hedged) == 1, [a.json()["budget"] for a in answers]
    calls, hedges = await HedgeBudget(redis).counts(_tenant(agent), agent)
    assert hedges == 1 and hedges <= 0.05 * calls
    refused = [r for r in await _audit(stack, agent, "slow_first") if r["hedge"].get("not_started")]
    assert all("budget" in r["hedge"]["not_started"] for r in refused)


async def test_a_hedge_takes_only_a_free_slot_of_the_callers_own_share(
    stack: EmbeddedStack,
) -> None:
    """With all but one of the agent's sandboxes busy, the slow call takes the last one and
    its hedge does not start: it never waits for, or takes, a sandbox beyond the share."""
    agent = f"s{uuid.uuid4().hex[:8]}"
    blockers = [_marker() for _ in range(AGENT_SHARE - 1)]
    marker = _marker()
    async with _client(stack, agent) as http:
        await _warm_up(http, "slow_first")
        blocked: dict[str, httpx.Response] = {}

        async def block(blocker: str) -> None:  # not idempotent: these never hedge
            blocked[blocker] = await _call(http, "slow_first_unsafe", blocker, 8_000)

        async with anyio.create_task_group() as group:
            for blocker in blockers:
                group.start_soon(block, blocker)
            for blocker in blockers:
                await until(lambda b=blocker: bool(processes_with(b)) or b in blocked, 60)  # type: ignore[misc]
                assert blocker not in blocked, blocked[blocker].text
            answer = await _call(http, "slow_first", marker, first_ms=1_500)
            group.cancel_scope.cancel()
    assert answer.status_code == 200, answer.text
    assert answer.json()["result"]["attempt"] == "first"
    assert answer.json()["budget"]["hedged"] is False
    audited = await _audit(stack, agent, "slow_first")
    refused = [r for r in audited if r["hedge"].get("not_started")]
    assert len(refused) == 1, [r["hedge"] for r in audited]
    record = refused[0]
    assert record["hedge"]["decision"] == "hedge" and record["hedge"]["started"] is False
    assert "share" in record["hedge"]["not_started"]


async def test_a_hedge_never_runs_past_the_deadline(stack: EmbeddedStack) -> None:
    """Both attempts slow: the hedge starts, and both are killed so the answer comes before
    the run's deadline; neither attempt's processes outlive it."""
    agent = f"d{uuid.uuid4().hex[:8]}"
    marker = _marker()
    async with _client(stack, agent) as http:
        await _warm_up(http, "slow_first")
        deadline = time.time() * 1000 + 2_500
        answer = await _call(
            http, "slow_first", marker, first_ms=30_000, hedge_ms=30_000,
            headers={"X-Conclave-Deadline": str(int(deadline))},
        )  # fmt: skip
        answered = time.time() * 1000
        assert answer.status_code == 504, answer.text
        assert answer.json()["code"] == "TOOL_TIMEOUT"
        late_ms = answered - deadline
        assert late_ms <= REPLY_TOLERANCE_MS, f"answered {late_ms:.0f} ms past the deadline"
        await _gone(marker)
    audited = await _audit(stack, agent, "slow_first")
    (record,) = [r for r in audited if r["code"] == "TOOL_TIMEOUT"]
    assert record["hedge"]["decision"] == "hedge" and record["hedge"]["started"] is True
