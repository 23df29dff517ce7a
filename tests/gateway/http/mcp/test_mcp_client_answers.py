"""A client's JSON-RPC response POSTed to `/mcp`: the answer to a request the gateway sent it
on a call's stream (`ClientRequests`). It reaches the call waiting for it on any replica (two
apps on one Redis here), only from the identity the request was sent to; another identity's
is refused (400), and an id the gateway never issued too."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

import anyio
import httpx
import pytest
from redis.asyncio import Redis

from gateway.assembly import create_app
from gateway.config import Settings
from gateway.http import gateway_parts
from gateway.identity.tokens import issue_token
from gateway.mcp_state import ClientRequests
from protocol import Principal

pytestmark = pytest.mark.anyio


@pytest.fixture
async def replicas(settings: Settings, redis: Redis) -> AsyncIterator[list[Any]]:
    """Two gateway apps (replicas) on one Redis, each listening for answers."""
    async with AsyncExitStack() as stack:
        apps = [create_app(settings), create_app(settings)]
        for app in apps:
            await stack.enter_async_context(app.router.lifespan_context(app))
        yield apps


def _principal(agent: str) -> Principal:
    return Principal(tenant="t", agent=agent, expires_at=int(time.time()) + 600, token_id="j")


def _headers(settings: Settings, agent: str) -> dict[str, str]:
    token = issue_token(settings, tenant="t", agent=agent, scopes=["tool:*"])
    return {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}


async def _post(app: Any, headers: dict[str, str], body: dict[str, Any]) -> httpx.Response:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
        return await client.post("/mcp", json=body, headers=headers)


async def test_the_callers_answer_reaches_the_call_on_another_replica_anothers_is_refused(
    settings: Settings, replicas: list[Any]
) -> None:
    holding, other = replicas
    requests: ClientRequests = gateway_parts(holding).client_requests
    request_id = requests.issue(_principal("caller"))
    answer = {"jsonrpc": "2.0", "id": request_id, "result": {"action": "accept"}}
    with requests.waiting(_principal("caller"), request_id) as answers:
        forged = await _post(other, _headers(settings, "intruder"), answer)
        assert forged.status_code == 400, forged.text
        refusal = forged.json()
        assert refusal["id"] is None
        assert refusal["error"]["data"]["code"] == "INVALID_REQUEST"
        own = await _post(other, _headers(settings, "caller"), answer)
        assert own.status_code == 202, own.text
        with anyio.fail_after(5):
            received = await answers.receive()
    assert received == answer  # the caller's, not the intruder's: that one never arrived


async def test_an_id_the_gateway_never_issued_and_an_unauthenticated_answer_are_refused(
    settings: Settings, replicas: list[Any]
) -> None:
    app = replicas[0]
    made_up = {"jsonrpc": "2.0", "id": 3, "result": {}}
    assert (await _post(app, _headers(settings, "caller"), made_up)).status_code == 400
    issued = gateway_parts(app).client_requests.issue(_principal("caller"))
    anonymous = await _post(app, {}, {"jsonrpc": "2.0", "id": issued, "result": {}})
    assert anonymous.status_code == 401
