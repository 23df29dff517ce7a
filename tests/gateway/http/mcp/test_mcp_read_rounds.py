"""A read and a prompt whose MCP source asks the client, through Conclave, for a client on
MCP 2026-07-28's wire (the handshake era's event stream is tested over real HTTP, in
tests/e2e/test_mcp_client_requests_e2e.py).

The upstream (`tools.harness.input_rounds_server`, the official `mcp` SDK's server, in its own
process) asks who reads `rounds://letter/{sender}` and whom the prompt `dedication` is for:
on the handshake era with an `elicitation/create` mid-request, on 2026-07-28 with its own
`InputRequiredResult`. Conclave serves it as the source `rt`, once on its own wire
(`wire = "2026-07-28"`: its rounds are relayed) and once on the handshake era's (its
mid-request question turned into a round of Conclave's for a 2026-07-28 client). The
official `mcp` client reads and gets the prompt, answering the question itself, its requests
alternating between two gateway replicas on one Redis; raw HTTP shows a relayed round's
state is bound to the URI it was given for.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import types
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from redis.asyncio import Redis

from gateway.config import Settings
from tests.gateway.http.mcp.rounds_replicas import (
    VERSION,
    Alternating,
    bearer,
    replicas,
    running_rounds_upstream,
)

pytestmark = pytest.mark.anyio

LETTER = "rounds://letter/bob"


@pytest.fixture(scope="module")
def upstream_url() -> Iterator[str]:
    yield from running_rounds_upstream()


def _auth(settings: Settings, agent: str) -> dict[str, str]:
    return bearer(settings, "reads", agent)


async def _read_and_prompt(
    settings: Settings, apps: list[Any], mode: str
) -> tuple[str, str, str, list[str]]:
    """The letter, the prompt's text and the client's version, read by the official client
    answering "ada" to every question (the questions it was asked)."""
    asked: list[str] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "ada"})

    http = httpx2.AsyncClient(
        transport=Alternating(*apps),
        base_url="http://gateway",
        headers=_auth(settings, f"reader-{mode}"),
        timeout=30,
    )
    transport = streamable_http_client("http://gateway/mcp", http_client=http)
    async with http, Client(transport, mode=mode, elicitation_callback=elicit) as client:
        read = await client.read_resource(LETTER)
        prompt = await client.get_prompt("rt__dedication", {"topic": "cats"})
        version = client.protocol_version
    (letter,) = read.contents
    (message,) = prompt.messages
    assert isinstance(letter, types.TextResourceContents), letter
    assert isinstance(message.content, types.TextContent), message
    return letter.text, message.content.text, str(version), asked


@pytest.mark.parametrize(
    "wire",
    [
        VERSION,  # the upstream's own rounds, relayed
        "handshake",  # the upstream asks mid-request: Conclave's rounds
    ],
)
async def test_a_2026_client_answers_a_servers_question_in_rounds_acrossreplicas(
    settings: Settings, redis: Redis, upstream_url: str, wire: str
) -> None:
    async with replicas(settings, upstream_url, wire) as apps:
        letter, prompt, version, asked = await _read_and_prompt(settings, apps, "auto")
    assert version == VERSION
    assert letter == "bob writes to ada"
    assert prompt == "Write about cats for ada"
    assert asked == ["Who reads this?", "Who reads this?"]


def _read(
    request_id: int, uri: str, declared: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": (
            {"elicitation": {}} if declared is None else declared
        ),
    }
    params = {"uri": uri, "_meta": meta, **extra}
    return {"jsonrpc": "2.0", "id": request_id, "method": "resources/read", "params": params}


def _headers(settings: Settings, agent: str, uri: str) -> dict[str, str]:
    return {
        **_auth(settings, agent),
        "Accept": "application/json",
        "MCP-Protocol-Version": VERSION,
        "Mcp-Method": "resources/read",
        "Mcp-Name": uri,
    }


@pytest.mark.parametrize("wire", [VERSION, "handshake"])
async def test_a_read_asking_what_the_client_did_not_declare_is_refused_at_once(
    settings: Settings, redis: Redis, upstream_url: str, wire: str
) -> None:
    async with (
        replicas(settings, upstream_url, wire) as (app, _),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gateway") as c,
    ):
        with anyio.fail_after(8):  # not at a time limit: at the upstream's first question
            refused = await c.post(
                "/mcp", json=_read(1, LETTER, declared={}), headers=_headers(settings, "x", LETTER)
            )
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["code"] == -32021
    assert error["data"]["requiredCapabilities"] == {"elicitation": {}}


async def test_an_upstreams_round_on_a_read_is_bound_to_its_uri_and_caller(
    settings: Settings, redis: Redis, upstream_url: str
) -> None:
    async with (
        replicas(settings, upstream_url, VERSION) as (first, second),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=first), base_url="http://gateway") as a,
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=second), base_url="http://gateway"
        ) as b,
    ):

        def headers(agent: str, uri: str) -> dict[str, str]:
            return _headers(settings, agent, uri)

        asking = await a.post("/mcp", json=_read(1, LETTER), headers=headers("caller", LETTER))
        assert asking.status_code == 200, asking.text
        round_one = asking.json()["result"]
        assert round_one["resultType"] == "input_required", round_one
        assert list(round_one["inputRequests"]) == ["reader"]  # the upstream's own key
        assert "ttlMs" not in round_one  # a question is not an answer to cache
        state = round_one["requestState"]
        assert state != "asked-reader"  # the gateway's, sealing the upstream's
        answers = {"reader": {"action": "accept", "content": {"name": "ada"}}}
        other = "rounds://letter/eve"
        for agent, uri in (("someone-else", LETTER), ("caller", other)):
            retry = _read(2, uri, requestState=state, inputResponses=answers)
            refused = await b.post("/mcp", json=retry, headers=headers(agent, uri))
            error = refused.json()["error"]
            assert error["data"]["code"] == "INVALID_REQUEST", refused.text
            assert "requestState" in error["data"]["message"]
        retry = _read(3, LETTER, requestState=state, inputResponses=answers)
        done = await b.post("/mcp", json=retry, headers=headers("caller", LETTER))
    assert done.status_code == 200, done.text
    answer = done.json()
    assert answer["id"] == 3
    assert answer["result"]["resultType"] == "complete"
    assert answer["result"]["contents"][0]["text"] == "bob writes to ada"


async def test_an_upstreams_round_on_a_prompt_is_bound_to_its_name_and_arguments(
    settings: Settings, redis: Redis, upstream_url: str
) -> None:
    meta = {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    }

    def prompt(request_id: int, topic: str, **extra: Any) -> dict[str, Any]:
        params = {"name": "rt__dedication", "arguments": {"topic": topic}, "_meta": meta}
        return {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "prompts/get",
            "params": {**params, **extra},
        }

    headers = {
        **_auth(settings, "prompter"),
        "Accept": "application/json",
        "MCP-Protocol-Version": VERSION,
        "Mcp-Method": "prompts/get",
        "Mcp-Name": "rt__dedication",
    }
    async with (
        replicas(settings, upstream_url, VERSION) as (first, second),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=first), base_url="http://gateway") as a,
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=second), base_url="http://gateway"
        ) as b,
    ):
        asking = await a.post("/mcp", json=prompt(1, "cats"), headers=headers)
        round_one = asking.json()["result"]
        assert round_one["resultType"] == "input_required", round_one
        state = round_one["requestState"]
        answers = {"reader": {"action": "accept", "content": {"name": "ada"}}}
        other = prompt(2, "dogs", requestState=state, inputResponses=answers)
        refused = await b.post("/mcp", json=other, headers=headers)
        assert refused.json()["error"]["data"]["code"] == "INVALID_REQUEST", refused.text
        same = prompt(3, "cats", requestState=state, inputResponses=answers)
        done = await b.post("/mcp", json=same, headers=headers)
    result = done.json()["result"]
    assert result["resultType"] == "complete", result
    assert result["messages"][0]["content"]["text"] == "Write about cats for ada"
