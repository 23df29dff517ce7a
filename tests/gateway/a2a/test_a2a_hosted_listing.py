"""ListTasks of a hosted agent through the in-process gateway (a real Redis): the caller's own
tasks filtered by `contextId` and `status`, paged by `pageToken`, over both bindings, and a
bad filter refused with the field named."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.config import Settings
from tests.helpers import admin_headers, in_process_gateway, registered_token, serf_in

pytestmark = pytest.mark.anyio


@pytest.fixture
async def gateway(settings: Settings, tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    config = tmp_path / "conclave.toml"
    config.write_text('[[a2a_agent]]\nname = "notes"\ntenant = "acme"\n')
    update = {"config": config, "sandbox_backend": "inprocess"}
    async with in_process_gateway(settings.model_copy(update=update)) as client:
        yield client


async def _caller(client: httpx.AsyncClient, settings: Settings, agent: str) -> dict[str, str]:
    token = await registered_token(
        client, admin_headers(settings), f"t-{agent}", agent, agents=["notes"]
    )
    return {"Authorization": f"Bearer {token}", "A2A-Version": "1.0"}


def _rpc(method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


async def _create(client: httpx.AsyncClient, caller: dict[str, str], context: str) -> str:
    message = {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"text": "note this"}],
        "contextId": context,
    }
    sent = await client.post(
        "/a2a/notes",
        json=_rpc("SendMessage", message=message, configuration={"returnImmediately": True}),
        headers=caller,
    )
    return str(sent.json()["result"]["task"]["id"])


async def _listed(
    client: httpx.AsyncClient, caller: dict[str, str], **params: Any
) -> dict[str, Any]:
    answer = await client.post("/a2a/notes", json=_rpc("ListTasks", **params), headers=caller)
    result: dict[str, Any] = answer.json()["result"]
    return result


async def test_list_tasks_keeps_one_conversation_and_pages_it(
    gateway: httpx.AsyncClient, settings: Settings
) -> None:
    caller = await _caller(gateway, settings, "lister")
    other = await _caller(gateway, settings, "other")
    ours = [await _create(gateway, caller, "trip") for _ in range(3)]
    await _create(gateway, caller, "taxes")
    await _create(gateway, other, "trip")  # another identity's, in a context of the same name
    trip = await _listed(gateway, caller, contextId="trip")
    assert [t["id"] for t in trip["tasks"]] == ours[::-1]  # newest first, ours alone
    assert trip["totalSize"] == 3 and trip["nextPageToken"] == ""
    assert {t["contextId"] for t in trip["tasks"]} == {"trip"}
    first = await _listed(gateway, caller, contextId="trip", pageSize=2)
    rest = await _listed(gateway, caller, context_id="trip", pageToken=first["nextPageToken"])
    assert [t["id"] for t in first["tasks"] + rest["tasks"]] == ours[::-1]
    assert first["totalSize"] == rest["totalSize"] == 3 and rest["nextPageToken"] == ""
    everything = await _listed(gateway, caller)
    assert everything["totalSize"] == 4
    rest_binding = await gateway.get("/a2a/notes/rest/tasks?contextId=taxes", headers=caller)
    assert [t["contextId"] for t in rest_binding.json()["tasks"]] == ["taxes"]


async def test_list_tasks_filters_by_state_and_refuses_a_bad_filter(
    gateway: httpx.AsyncClient, settings: Settings
) -> None:
    caller = await _caller(gateway, settings, "stater")
    kept = await _create(gateway, caller, "c1")
    cancelled = await _create(gateway, caller, "c1")
    await gateway.post("/a2a/notes", json=_rpc("CancelTask", id=cancelled), headers=caller)
    submitted = await _listed(gateway, caller, status="TASK_STATE_SUBMITTED")
    assert [t["id"] for t in submitted["tasks"]] == [kept]
    ended = await _listed(gateway, caller, contextId="c1", status="TASK_STATE_CANCELED")
    assert [t["id"] for t in ended["tasks"]] == [cancelled]
    for params, field in (
        ({"status": "DONE"}, "status"),
        ({"pageToken": "not-a-task"}, "pageToken"),
        ({"pageSize": "many"}, "pageSize"),
    ):
        refused = await gateway.post("/a2a/notes", json=_rpc("ListTasks", **params), headers=caller)
        serf, _ = serf_in(refused.json())
        assert refused.json()["error"]["code"] == -32602, refused.text
        assert serf["code"] == "INVALID_ARGUMENTS" and serf["param_hints"].keys() == {field}
