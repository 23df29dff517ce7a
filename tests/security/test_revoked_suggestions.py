"""A revoked token learns nothing (issue 26): it got "did you mean" suggestions naming served
tools, because the authorize stage answered TOOL_NOT_FOUND before admission checked the
token's generation. Now it is refused AUTH_REVOKED; a current caller still gets suggestions,
and only of tools it may call."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from conclave.stack import EmbeddedStack
from gateway.config import Settings

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def stack(redis_url: str) -> Iterator[EmbeddedStack]:
    settings = Settings(redis_url=redis_url, port=0, sandbox_backend="inprocess")
    with EmbeddedStack(settings) as running:
        yield running


@pytest.fixture
async def http(stack: EmbeddedStack) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=stack.url, timeout=30) as client:
        yield client


async def _register(
    http: httpx.AsyncClient, stack: EmbeddedStack, tenant: str, agent: str, tools: list[str]
) -> dict[str, str]:
    registered = await http.post(
        "/v1/agents",
        json={"tenant": tenant, "agent": agent, "tools": tools},
        headers=stack.admin_headers,
    )
    assert registered.status_code in (200, 201), registered.text
    return {"Authorization": f"Bearer {registered.json()['token']}"}


async def _typo(http: httpx.AsyncClient, headers: dict[str, str]) -> httpx.Response:
    return await http.post("/v1/tools/ecoh/call", json={"arguments": {}}, headers=headers)


async def test_a_revoked_token_gets_no_suggestions(
    http: httpx.AsyncClient, stack: EmbeddedStack
) -> None:
    attacker = await _register(http, stack, "evil", "prober", ["*"])
    victim = await _register(http, stack, "good", "worker", ["echo"])
    before = await _typo(http, attacker)
    assert before.status_code == 404 and before.json()["details"]["suggestions"] == ["echo"]

    revoked = await http.delete("/v1/agents/evil/prober", headers=stack.admin_headers)
    assert revoked.status_code == 200, revoked.text
    after = await _typo(http, attacker)
    assert after.status_code == 401, after.text
    assert after.json()["code"] == "AUTH_REVOKED"
    assert "echo" not in after.text and "suggestions" not in after.json()["details"]

    # The victim, current, still gets its suggestion and its calls.
    assert (await _typo(http, victim)).json()["details"]["suggestions"] == ["echo"]
    ok = await http.post(
        "/v1/tools/echo/call", json={"arguments": {"message": "v"}}, headers=victim
    )
    assert ok.status_code == 200 and ok.json()["result"] == "v"


async def test_suggestions_name_only_tools_the_caller_may_call(
    http: httpx.AsyncClient, stack: EmbeddedStack
) -> None:
    reader = await _register(http, stack, "good", "reader", ["read_*"])
    typo = await _typo(http, reader)
    assert typo.status_code == 404
    assert typo.json()["details"]["suggestions"] == []
    assert "echo" not in typo.text
