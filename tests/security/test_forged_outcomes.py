"""Tool code cannot forge its own outcome, and what a tenant's calls teach the budgets stays
that tenant's.

Two forgeries, each on bwrap and docker: the tool writes its own result frame into the
runner's result pipe (`forge_outcome`), and a tool module patches the runner at import so
the runner itself reports the lie (`forge_report`). Both claim a TOOL_TIMEOUT that ran, and
was killed, a billion ms late with a billion ms of CPU. Believed, one tenant's five calls
made the shared kill margin so large that every tenant's budgeted call was refused with
BUDGET_EXHAUSTED for the window's ten minutes.
"""

from __future__ import annotations

import time

import pytest

from protocol import ADMIN_KEY_HEADER, DEADLINE_HEADER
from tests.security.conftest import SandboxedGateway

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.serial,
]  # timing-bound: run alone, after the parallel tiers (.ci/test)

FORGERIES = ["forge_outcome", "forge_report"]


async def _forge(gateway: SandboxedGateway, tool: str, times: int) -> list[str]:
    evil = gateway.bearer("evil", "mallory")
    codes = []
    for _ in range(times):
        answer = await gateway.client.post(
            f"/v1/tools/{tool}/call", json={"arguments": {}}, headers=evil
        )
        assert answer.status_code >= 400, answer.text
        codes.append(answer.json()["code"])
    return codes


async def _budgeted_echo(gateway: SandboxedGateway, tenant: str) -> tuple[int, str]:
    deadline = int(time.time() * 1000) + 3_000
    answer = await gateway.client.post(
        "/v1/tools/echo/call",
        json={"arguments": {"message": "mine"}},
        headers={**gateway.bearer(tenant, "victim"), DEADLINE_HEADER: str(deadline)},
    )
    return answer.status_code, answer.text


@pytest.mark.parametrize("forgery", FORGERIES)
async def test_a_forged_outcome_leaves_other_tenants_budgets_alone(
    sandboxed_gateway: SandboxedGateway, forgery: str
) -> None:
    await _forge(sandboxed_gateway, forgery, 5)
    # The victim's budgeted calls run, as before the attack.
    for _ in range(3):
        status, text = await _budgeted_echo(sandboxed_gateway, "acme")
        assert status == 200, text


@pytest.mark.parametrize("forgery", FORGERIES)
async def test_the_attackers_own_record_is_clamped_to_what_the_host_saw(
    sandboxed_gateway: SandboxedGateway, forgery: str
) -> None:
    gateway = sandboxed_gateway
    codes = await _forge(gateway, forgery, 5)
    if forgery == "forge_outcome":
        # Tool code wrote the frame: the runner decides the code, never the payload.
        assert set(codes) == {"TOOL_FAILED"}
    evil = gateway.bearer("evil", "mallory")
    seen = await gateway.client.get(f"/v1/tools/{forgery}/latency", headers=evil)
    assert seen.status_code == 200, seen.text
    # At most the call's 2 s grant: never the billion ms claimed.
    assert seen.json()["samples"] == 5 and seen.json()["p95_ms"] <= 2_000
    admin = {ADMIN_KEY_HEADER: gateway.settings.admin_key.get_secret_value()}
    audit = await gateway.client.get("/v1/audit", params={"agent": "mallory"}, headers=admin)
    usages = [record["usage"] for record in audit.json() if record["tool"] == forgery]
    assert len(usages) == 5
    for usage in usages:
        assert usage["wall_ms"] <= 2_000  # what the host itself waited
        assert usage["cpu_ms"] <= 2_000  # the call's CPU limit (1 s, killed at 2 s)
        assert usage["peak_rss_kb"] <= 1024 * 1024  # the sandbox's memory ceiling, < 1 GiB
    # The attacker's own later budgeted calls of another tool are not hurt either.
    status, text = await _budgeted_echo(gateway, "evil")
    assert status == 200, text
