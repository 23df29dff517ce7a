"""A server's request to the calling client during a call (`CallEvents.request`): passed on
only when the client declared the feature, bounded in number and size, and answered with an
error when the client does not answer in time, so the server never waits for good."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from protocol import client_capabilities, jsonrpc
from sandbox.runner import MAX_PENDING_REQUESTS, REQUEST_LIMIT
from tests.helpers import until
from tools.calls import REQUEST_TIMEOUT, CallEvents

pytestmark = pytest.mark.anyio

ELICIT = {"jsonrpc": "2.0", "id": 7, "method": "elicitation/create", "params": {"message": "?"}}


class _Client:
    """The calling client: records what it is asked; answers when `release` is set."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, dict[str, Any]]] = []
        self.release = anyio.Event()

    async def ask(self, method: str, params: dict[str, Any]) -> object:
        self.asked.append((method, params))
        await self.release.wait()
        return {"jsonrpc": "2.0", "id": "ours", "result": {"action": "decline"}}


def _events(client: _Client, declared: dict[str, Any]) -> CallEvents:
    return CallEvents(lambda _: None, ask=client.ask, capabilities=client_capabilities(declared))


def _later(seconds: float) -> float:
    return anyio.current_time() + seconds


async def test_a_declared_feature_is_asked_and_the_clients_answer_returned() -> None:
    client = _Client()
    client.release.set()
    answer = await _events(client, {"elicitation": {}}).request(ELICIT, _later(5))
    assert answer == {"result": {"action": "decline"}}
    assert client.asked == [("elicitation/create", {"message": "?"})]


async def test_a_feature_the_client_did_not_declare_is_refused_without_asking() -> None:
    client = _Client()
    answer = await _events(client, {"sampling": {}}).request(ELICIT, _later(5))
    assert answer["error"]["code"] == jsonrpc.METHOD_NOT_FOUND
    assert "elicitation/create" in answer["error"]["message"]
    assert client.asked == []


async def test_a_client_that_does_not_answer_gets_the_server_an_error_by_the_deadline() -> None:
    client = _Client()
    with anyio.fail_after(5):
        answer = await _events(client, {"elicitation": {}}).request(ELICIT, _later(0.05))
    assert answer["error"]["code"] == REQUEST_TIMEOUT


async def test_requests_past_the_pending_bound_or_the_size_bound_are_refused_at_once() -> None:
    client = _Client()
    events = _events(client, {"elicitation": {}})
    answers: list[dict[str, Any]] = []

    async def ask() -> None:
        answers.append(await events.request(ELICIT, _later(5)))

    async with anyio.create_task_group() as asking:
        for _ in range(MAX_PENDING_REQUESTS):
            asking.start_soon(ask)
        await until(lambda: len(client.asked) == MAX_PENDING_REQUESTS, timeout_s=5)
        with anyio.fail_after(5):
            one_more = await events.request(ELICIT, _later(5))
            huge = {**ELICIT, "params": {"message": "x" * REQUEST_LIMIT}}
            client.release.set()
            too_big = await events.request(huge, _later(5))
    assert one_more["error"]["code"] == jsonrpc.INVALID_REQUEST
    assert too_big["error"]["code"] == jsonrpc.INVALID_PARAMS
    assert len(client.asked) == MAX_PENDING_REQUESTS
    assert answers == [{"result": {"action": "decline"}}] * MAX_PENDING_REQUESTS


async def test_ping_is_answered_without_the_client_and_nobody_listening_asks_nothing() -> None:
    client = _Client()
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    assert await _events(client, {}).request(ping, _later(1)) == {"result": {}}
    unheard = CallEvents(lambda _: None, capabilities=client_capabilities({"elicitation": {}}))
    refused = await unheard.request(ELICIT, _later(1))
    assert refused["error"]["code"] == jsonrpc.METHOD_NOT_FOUND
    assert client.asked == []
