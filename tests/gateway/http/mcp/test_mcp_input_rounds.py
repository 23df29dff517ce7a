"""MCP 2026-07-28's rounds (`InputRequiredResult`, retried with `inputResponses`) through
Conclave, for a client on that wire.

An `mcp_http` upstream on that wire asks the client in rounds itself.

The upstream (`tools.harness.input_rounds_server`, the official `mcp` SDK's server, in its own
process) seals its own `requestState` and refuses one that comes back changed. Two gateway
replicas on one Redis serve it as the source `rt` (`wire = "2026-07-28"`). The official `mcp`
client on the 2026-07-28 wire answers the upstream's elicitations, its rounds alternating
between the replicas; raw HTTP shows the questions keep the upstream's own keys, that the
client sees a state of the gateway's (not the upstream's), and that a changed state, another
identity's or another tool's is refused.

A handshake-era upstream (the conformance fixture, `fx`) asks mid-call instead; Conclave turns
its request into a round of its own, for a client that accepts only JSON too, and into a
task's `input_required` status, answered by `tasks/update` on another replica.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import types
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from pydantic import HttpUrl
from redis.asyncio import Redis

from conclave.bench.mcp.conformance_suite import running_fixture
from gateway.assembly import create_app
from gateway.config import Settings
from tests.gateway.http.mcp.rounds_replicas import (
    VERSION,
    Alternating,
    bearer,
    replicas,
    running_rounds_upstream,
)
from tools.sources import McpHttpSource

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def upstream_url() -> Iterator[str]:
    yield from running_rounds_upstream()


def _auth(settings: Settings, agent: str) -> dict[str, str]:
    return bearer(settings, "rounds", agent)


async def test_the_official_client_answers_an_upstreams_own_rounds_acrossreplicas(
    settings: Settings, redis: Redis, upstream_url: str
) -> None:
    asked: list[str] = []
    names = iter(["ada", "first", "second"])

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": next(names)})

    async with replicas(settings, upstream_url) as (first, second):
        http = httpx2.AsyncClient(
            transport=Alternating(first, second),
            base_url="http://gateway",
            headers=_auth(settings, "official"),
            timeout=30,
        )
        transport = streamable_http_client("http://gateway/mcp", http_client=http)
        async with http, Client(transport, mode="auto", elicitation_callback=elicit) as client:
            assert client.protocol_version == VERSION
            greeted = await client.call_tool("rt__ask_name", {})
            stepped = await client.call_tool("rt__two_steps", {})
    texts = [
        "".join(c.text for c in r.content if isinstance(c, types.TextContent))
        for r in (greeted, stepped)
    ]
    assert not greeted.is_error and not stepped.is_error, texts
    # The upstream got its own state back (else its SDK refuses it) and the answers.
    assert texts == ["Hello, ada! state-ok", "first+second"]
    assert asked == ["What is your name?", "The first?", "And the second?"]


def _call(request_id: int, tool: str, **extra: Any) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    }
    params = {"name": tool, "arguments": {}, "_meta": meta, **extra}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def _headers(settings: Settings, agent: str, tool: str) -> dict[str, str]:
    return {
        **_auth(settings, agent),
        "Accept": "application/json",  # a client that takes no event stream
        "MCP-Protocol-Version": VERSION,
        "Mcp-Method": "tools/call",
        "Mcp-Name": tool,
    }


async def test_an_upstreams_round_keeps_its_keys_and_only_its_caller_may_answer_it(
    settings: Settings, redis: Redis, upstream_url: str
) -> None:
    tool = "rt__ask_name"
    async with (
        replicas(settings, upstream_url) as (first, second),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=first), base_url="http://gateway") as a,
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=second), base_url="http://gateway"
        ) as b,
    ):
        caller = _headers(settings, "caller", tool)
        asking = await a.post("/mcp", json=_call(1, tool), headers=caller)
        assert asking.status_code == 200, asking.text
        round_one = asking.json()["result"]
        assert round_one["resultType"] == "input_required"
        # The upstream's questions, under its own keys.
        assert list(round_one["inputRequests"]) == ["user_name"]
        assert round_one["inputRequests"]["user_name"]["method"] == "elicitation/create"
        state = round_one["requestState"]
        assert not state.startswith("v1.")  # the gateway's, not the upstream's (its SDK's "v1.")
        answers = {"user_name": {"action": "accept", "content": {"name": "ada"}}}

        changed = state[:-2] + ("AA" if state[-2:] != "AA" else "BB")
        other_tool = "rt__two_steps"
        refusals = [  # changed; another identity's; another tool's; other arguments (the
            # retry is the same call)
            (caller, tool, changed, {}),
            (_headers(settings, "someone-else", tool), tool, state, {}),
            (_headers(settings, "caller", other_tool), other_tool, state, {}),
            (caller, tool, state, {"other": 1}),
        ]
        for headers, name, sent, arguments in refusals:
            retry = _call(2, name, requestState=sent, inputResponses=answers)
            retry["params"]["arguments"] = arguments
            refused = await b.post("/mcp", json=retry, headers=headers)
            error = refused.json()["error"]
            assert error["data"]["code"] == "INVALID_REQUEST", refused.text
            assert "requestState" in error["data"]["message"]

        retry = _call(3, tool, requestState=state, inputResponses=answers)
        done = await b.post("/mcp", json=retry, headers=caller)
    assert done.status_code == 200, done.text
    answer = done.json()
    assert answer["id"] == 3
    assert answer["result"]["resultType"] == "complete"
    assert answer["result"]["content"][0]["text"] == "Hello, ada! state-ok"


async def test_a_handshake_era_client_calls_such_an_upstream_as_before(
    settings: Settings, redis: Redis, upstream_url: str
) -> None:
    async with replicas(settings, upstream_url) as (first, _):
        http = httpx2.AsyncClient(
            transport=httpx2.ASGITransport(app=first),
            base_url="http://gateway",
            headers=_auth(settings, "legacy"),
        )
        transport = streamable_http_client("http://gateway/mcp", http_client=http)
        async with http, Client(transport, mode="legacy") as client:
            echoed = await client.call_tool("rt__echo", {"message": "hi"})
    assert not echoed.is_error
    assert echoed.content[0].text == "hi"  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def fixture_url() -> Iterator[str]:
    with running_fixture() as url:
        yield url


async def test_a_json_only_client_is_asked_a_handshake_era_servers_question_in_rounds(
    settings: Settings, redis: Redis, fixture_url: str
) -> None:
    """No event stream: the fixture's elicitation mid-call is a round all the same."""
    source = McpHttpSource(kind="mcp_http", name="fx", url=HttpUrl(fixture_url))
    tool = "fx__test_elicitation"
    app = create_app(settings, sources=(source,))
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gateway") as c,
    ):
        headers = _headers(settings, "json-only", tool)
        call = _call(1, tool)
        call["params"]["arguments"] = {"message": "who?"}
        asking = await c.post("/mcp", json=call, headers=headers, timeout=60)
        assert asking.headers["content-type"] == "application/json", asking.text
        round_one = asking.json()["result"]
        assert round_one["resultType"] == "input_required", round_one
        ((key, request),) = round_one["inputRequests"].items()
        assert request["method"] == "elicitation/create"
        assert request["params"]["message"] == "who?"
        answers = {key: {"action": "accept", "content": {"username": "ada"}}}
        retry = _call(2, tool, requestState=round_one["requestState"], inputResponses=answers)
        retry["params"]["arguments"] = {"message": "who?"}
        done = await c.post("/mcp", json=retry, headers=headers, timeout=60)
    answer = done.json()["result"]
    assert answer["resultType"] == "complete" and not answer["isError"], answer
    assert 'content={"username": "ada"}' in answer["content"][0]["text"]


async def _task_message(
    http: httpx.AsyncClient, settings: Settings, method: str, params: dict[str, Any]
) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {
            "elicitation": {},
            "extensions": {"io.modelcontextprotocol/tasks": {}},
        },
        "conclave/task": True,
    }
    named = params.get("name", params.get("taskId"))
    headers = {**_headers(settings, "tasked", str(named)), "Mcp-Method": method}
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    answer = await http.post("/mcp", json=message, headers=headers, timeout=30)
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()["result"]
    return result


async def _polled(
    http: httpx.AsyncClient, settings: Settings, task_id: str, status: str
) -> dict[str, Any]:
    with anyio.fail_after(30):
        while True:
            task = await _task_message(http, settings, "tasks/get", {"taskId": task_id})
            if task["status"] == status:
                return task
            assert task["status"] in ("working", "input_required"), task
            await anyio.sleep(0.05)  # a client polls: there is no event to await


@asynccontextmanager
async def _clients(*apps: Any) -> AsyncIterator[list[httpx.AsyncClient]]:
    async with AsyncExitStack() as stack:
        clients = []
        for app in apps:
            transport = httpx.ASGITransport(app=app)
            client = httpx.AsyncClient(transport=transport, base_url="http://gateway")
            clients.append(await stack.enter_async_context(client))
        yield clients


async def test_a_tasks_question_waits_in_the_task_for_tasks_update_on_any_replica(
    settings: Settings, redis: Redis, fixture_url: str
) -> None:
    async with AsyncExitStack() as stack:
        apps = await stack.enter_async_context(
            replicas(settings, fixture_url, wire="handshake", name="fx")
        )
        first, second = await stack.enter_async_context(_clients(*apps))
        call = {"name": "fx__test_elicitation", "arguments": {"message": "who?"}}
        created = await _task_message(first, settings, "tools/call", call)
        assert created["resultType"] == "task", created
        task_id = created["taskId"]
        waiting = await _polled(second, settings, task_id, "input_required")
        ((key, request),) = waiting["inputRequests"].items()
        assert request["method"] == "elicitation/create"
        assert request["params"]["message"] == "who?"
        elicited = {"action": "accept", "content": {"username": "ada"}}
        wrong = {"inputResponses": {"conclave-not-asked.0": elicited}}
        await _task_message(second, settings, "tasks/update", {"taskId": task_id, **wrong})
        still = await _task_message(second, settings, "tasks/get", {"taskId": task_id})
        assert still["status"] == "input_required"  # an unknown key is ignored
        update = {"taskId": task_id, "inputResponses": {key: elicited}}
        assert await _task_message(second, settings, "tasks/update", update) is not None
        done = await _polled(second, settings, task_id, "completed")
    result = done["result"]
    assert not result["isError"], result
    assert f"content={json.dumps(elicited['content'])}" in result["content"][0]["text"]


async def test_a_task_answers_an_upstreams_own_rounds_through_tasks_update(
    settings: Settings, redis: Redis, upstream_url: str
) -> None:
    async with (
        replicas(settings, upstream_url) as apps,
        _clients(*apps) as (first, second),
    ):
        created = await _task_message(first, settings, "tools/call", {"name": "rt__two_steps"})
        assert created["resultType"] == "task", created
        task_id = created["taskId"]
        answered: set[str] = set()
        for message, name in (("The first?", "one"), ("And the second?", "two")):
            with anyio.fail_after(30):  # the next question: not one answered already
                while True:
                    task = await _polled(second, settings, task_id, "input_required")
                    if not answered & set(task.get("inputRequests", {})):
                        break
                    await anyio.sleep(0.05)
            assert "inputRequests" in task, task
            ((key, request),) = task["inputRequests"].items()
            assert request["params"]["message"] == message
            answer = {key: {"action": "accept", "content": {"name": name}}}
            await _task_message(
                second, settings, "tasks/update", {"taskId": task_id, "inputResponses": answer}
            )
            answered.add(key)
        done = await _polled(second, settings, task_id, "completed")
    assert done["result"]["content"][0]["text"] == "one+two"
