"""`SharedState` retries a conflicted transaction from the 409's values: one request, no reread."""

from __future__ import annotations

import httpx
import pytest

from agents.client import GatewayClient
from agents.shared_state import SharedState, Values
from gateway.state.checker import check_history
from protocol.agents import AgentRegistration
from protocol.state import NamespaceConfig
from tests.agents.conftest import Gateway

pytestmark = pytest.mark.anyio


class CountingTransport(httpx.AsyncBaseTransport):
    """The real transport, noting each request that goes through it."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.requests: list[tuple[str, str]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append((request.method, request.url.path))
        return await self.inner.handle_async_request(request)


async def test_a_conflicted_transaction_retries_from_the_409_without_rereading(
    gateway: Gateway, admin: GatewayClient
) -> None:
    tokens = {}
    for name in ("a", "b"):
        registration = AgentRegistration(tenant="acme", agent=name, namespaces={"ns": "write"})
        tokens[name] = (await admin.register_agent(registration)).token
    counting = CountingTransport(gateway.transport)
    a = GatewayClient(gateway.base_url, tokens["a"], transport=counting)
    b = admin.for_token(tokens["b"])
    await b.create_namespace("ns", NamespaceConfig())
    seen: list[Values] = []

    async def increment(current: Values) -> Values:
        seen.append(dict(current))
        if len(seen) == 1:  # b commits between a's read and a's commit: a must conflict
            await SharedState(b, "ns").transact(["counter"], lambda _: {"counter": 10})
        return {"counter": current.get("counter", 0) + 1}

    result = await SharedState(a, "ns").transact(["counter"], increment)
    history = await b.history("ns")
    counter = await b.read("ns", "counter")
    await a.aclose()
    await b.aclose()
    assert seen == [{}, {"counter": 10}]  # the retry computed from b's value
    assert (result.attempts, result.conflicts, result.values) == (2, 1, {"counter": 11})
    assert counting.requests == [
        ("GET", "/v1/state/ns/counter"),
        ("POST", "/v1/state/ns/commit"),
        ("POST", "/v1/state/ns/commit"),  # the retry: no GET before it
    ]
    assert (counter.value, counter.version) == (11, 2)
    report = check_history(history, {"counter": (counter.version, counter.value)})
    assert report.serializable and report.commits == 2, report.anomalies
