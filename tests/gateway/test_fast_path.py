"""The hot routes answer like the full stack: the same tool call, the same refusals."""

from __future__ import annotations

import httpx
import pytest

from gateway.identity.tokens import issue_token
from gateway.settings import Settings

pytestmark = pytest.mark.anyio


def _auth(settings: Settings) -> dict[str, str]:
    token = issue_token(settings, tenant="fast", agent="a", scopes=["tool:echo"])
    return {"Authorization": f"Bearer {token}"}


async def test_a_tool_call_on_the_hot_path_answers_and_refuses_as_before(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    ok = await client.post(
        "/v1/tools/echo/call", json={"arguments": {"message": "hi"}}, headers=_auth(settings)
    )
    assert ok.status_code == 200
    assert ok.json()["tool"] == "echo"
    unauthenticated = await client.post("/v1/tools/echo/call", json={"arguments": {}})
    assert unauthenticated.status_code == 401
    assert unauthenticated.json()["code"] == "AUTH_REQUIRED"
    assert unauthenticated.headers["WWW-Authenticate"] == "Bearer"


async def test_other_methods_and_paths_still_take_the_full_stack(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    no_stream = await client.get("/mcp", headers=_auth(settings))
    assert no_stream.status_code == 405  # the /mcp GET route, not the hot POST handler
    assert no_stream.headers["Allow"] == "POST"
    nested = await client.post("/v1/tools/a/b/call", json={}, headers=_auth(settings))
    assert nested.status_code == 404
    assert nested.json()["code"] == "NOT_FOUND"
    listing = await client.get("/v1/tools", headers=_auth(settings))
    assert [spec["name"] for spec in listing.json()] == ["echo"]


async def test_state_routes_on_the_hot_path_keep_their_answers(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    token = issue_token(settings, tenant="fast", agent="a", scopes=["state:*:write"])
    headers = {"Authorization": f"Bearer {token}"}
    assert (await client.put("/v1/state/ns", json={}, headers=headers)).status_code == 201
    unauthenticated = await client.post("/v1/state/ns/commit", json={"writes": []})
    assert unauthenticated.status_code == 401
    assert unauthenticated.json()["code"] == "AUTH_REQUIRED"
    write = {"writes": [{"key": "a/b", "value": 1}]}
    assert (await client.post("/v1/state/ns/commit", json=write, headers=headers)).is_success
    read = await client.get("/v1/state/ns/a/b", headers=headers)
    assert (read.json()["value"], read.json()["version"]) == (1, 1)
    leased = await client.post("/v1/state/ns/leases", json={"keys": ["a/b"]}, headers=headers)
    assert leased.status_code == 200
    released = await client.delete("/v1/state/ns/leases/a/b", headers=headers)
    assert released.status_code == 204
    # The namespace itself and its history (query parameters, validated) take the full stack.
    described = await client.get("/v1/state/ns", headers=headers)
    assert described.json()["config"]["mode"] == "optimistic"
    history = await client.get("/v1/state/ns/history", params={"after": "x"}, headers=headers)
    assert history.status_code == 400
    assert history.json()["code"] == "INVALID_REQUEST" and "after" in history.json()["param_hints"]
