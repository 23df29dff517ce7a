"""A chain under ATBA answers by its deadline, even when getting a sandbox eats the grant.

Every kill recycles its sandbox, so the call after it (ATBA's retry) waits for a cold start
that can outlast the whole remaining budget. The gateway must then stop waiting and answer
(`DEADLINE_EXCEEDED`, nothing ran) before the deadline, rather than run the call for what
is left and answer after the deadline with the kill's lateness and the reply on top.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import httpx
import pytest

from conclave.stack import EmbeddedStack
from gateway.config import Settings
from tests.e2e.test_budgets_e2e import BUDGET_SETTINGS

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.serial,
]  # timing-bound: run alone, after the parallel tiers (.ci/test)

# What the reply may add after the deadline: the client's side of one local HTTP exchange.
REPLY_TOLERANCE_MS = 40


@pytest.fixture(scope="module")
def stack(redis_url: str, sandbox_backend: str) -> Iterator[EmbeddedStack]:
    settings = Settings(
        redis_url=redis_url, port=0, sandbox_backend=sandbox_backend, **BUDGET_SETTINGS
    )
    with EmbeddedStack(settings) as running:
        yield running


def _now_ms() -> float:
    return time.time() * 1000


async def _cold_start_ms(stack: EmbeddedStack) -> float:
    """How long a brand-new agent's first (instant) call takes: mostly its sandbox's start."""
    token = stack.token("acme", f"cold{uuid.uuid4().hex[:8]}", ["tool:*"])
    async with httpx.AsyncClient(base_url=stack.url, timeout=30) as client:
        began = _now_ms()
        response = await client.post(
            "/v1/tools/heavy_tailed_sleep/call",
            json={"arguments": {"distribution": "fixed", "median_ms": 0}},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert response.status_code == 200, response.text
        return _now_ms() - began


async def test_a_chain_never_answers_after_its_deadline(stack: EmbeddedStack) -> None:
    cold_ms = await _cold_start_ms(stack)
    # A deadline well inside one cold start: each call's sandbox start outlasts it.
    deadline_rel = max(40.0, cold_ms / 3)
    token = stack.token("acme", f"chain{uuid.uuid4().hex[:8]}", ["tool:*"])
    headers = {"Authorization": f"Bearer {token}"}
    codes: list[str] = []
    async with httpx.AsyncClient(base_url=stack.url, headers=headers, timeout=30) as client:
        deadline = _now_ms() + deadline_rel
        while _now_ms() < deadline:  # the bench's ATBA client: retry kills, stop on a refusal
            response = await client.post(
                "/v1/tools/heavy_tailed_sleep/call",
                json={"arguments": {"distribution": "fixed", "median_ms": 5_000}},
                headers={
                    "X-Conclave-Deadline": str(int(deadline)),
                    "X-Conclave-Plan": "heavy_tailed_sleep,heavy_tailed_sleep",
                },
            )
            late_ms = _now_ms() - deadline
            code = response.json().get("code", "OK")
            codes.append(code)
            assert late_ms <= REPLY_TOLERANCE_MS, (
                f"{code} answered {late_ms:.0f} ms after the deadline "
                f"({deadline_rel:.0f} ms budget, cold start {cold_ms:.0f} ms)"
            )
            if code != "TOOL_TIMEOUT":
                break
    # Nothing could finish a 5 s sleep: every answer was a kill or a refusal, all in time.
    assert codes and set(codes) <= {"TOOL_TIMEOUT", "DEADLINE_EXCEEDED", "BUDGET_EXHAUSTED"}
