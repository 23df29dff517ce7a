"""Side by side: two parallel LangGraph branches increment one counter.

With plain LangGraph state the branches read the same value and one increment is silently
lost (an overwrite reducer keeps one write; a plain last-value channel refuses both). With
the counter in the gateway's store, the second commit is refused with a conflict, rereads
and retries: both increments land, and the history checker finds the run serializable.
"""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

import anyio
import pytest
from langgraph.errors import InvalidUpdateError
from langgraph.graph import END, START, StateGraph

from agents import GatewayClient
from agents.langgraph import TeamState, shared_state_node
from agents.shared_state import SharedState, Values
from gateway.state.checker import check_history
from protocol.agents import AgentRegistration
from protocol.state import NamespaceConfig

pytestmark = pytest.mark.anyio


def keep_last(_old: int, new: int) -> int:
    return new


class PlainState(TypedDict):
    counter: Annotated[int, keep_last]


class LastValueState(TypedDict):
    counter: int


def parallel_increments(state_type: type[Any]) -> Any:
    def increment(state: Any) -> dict[str, int]:
        return {"counter": state["counter"] + 1}

    graph = StateGraph(state_type)
    graph.add_node("a", increment)
    graph.add_node("b", increment)
    for branch in ("a", "b"):
        graph.add_edge(START, branch)
        graph.add_edge(branch, END)
    return graph.compile()


async def test_plain_langgraph_state_loses_one_of_two_parallel_increments() -> None:
    final = await parallel_increments(PlainState).ainvoke({"counter": 0})
    assert final["counter"] == 1  # two increments ran; one was silently dropped
    with pytest.raises(InvalidUpdateError):
        await parallel_increments(LastValueState).ainvoke({"counter": 0})


async def test_with_conclave_both_parallel_increments_land(admin: GatewayClient) -> None:
    clients: dict[str, GatewayClient] = {}
    for name in ("a", "b"):
        registration = AgentRegistration(tenant="acme", agent=name, namespaces={"graph": "write"})
        clients[name] = admin.for_token((await admin.register_agent(registration)).token)
    await clients["a"].create_namespace("graph", NamespaceConfig())

    # Both branches read before either commits, as in the plain graph: a deterministic race.
    both_read = anyio.Event()
    readers: set[str] = set()

    def increment(name: str) -> Any:
        async def update(current: Values) -> Values:
            readers.add(name)
            if len(readers) == 2:
                both_read.set()
            await both_read.wait()
            return {"counter": current.get("counter", 0) + 1}

        return update

    graph = StateGraph(TeamState)
    for name, client in clients.items():
        node = shared_state_node(name, SharedState(client, "graph"), ["counter"], increment(name))
        graph.add_node(name, node)
        graph.add_edge(START, name)
        graph.add_edge(name, END)
    final = await graph.compile().ainvoke({"task": "count"})

    counter = await clients["a"].read("graph", "counter")
    history = await clients["a"].history("graph")
    for client in clients.values():
        await client.aclose()
    assert (counter.value, counter.version) == (2, 2)
    commits = sorted(final["commits"], key=lambda c: c["attempts"])
    assert [(c["attempts"], c["conflicts"]) for c in commits] == [(1, 0), (2, 1)]
    # one version chain 0 -> 1 -> 2, each commit built on the value it read
    assert [(e.keys["counter"], e.values["counter"]) for e in history] == [((0, 1), 1), ((1, 2), 2)]
    report = check_history(history, {"counter": (counter.version, counter.value)})
    assert report.serializable and report.commits == 2, report.anomalies
