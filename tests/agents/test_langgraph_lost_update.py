"""What LangGraph guards when branches write one key, and the case it cannot guard at all.

Inside one graph run LangGraph handles parallel branches itself: a plain key (a `LastValue`
channel) refuses two writes in one step with `InvalidUpdateError`, and a key with a reducer
gets whatever the reducer makes of both writes (`operator.add`: both appends). What no graph
sees is data two separate runs share: two graph runs in two OS processes that read-modify-write
one list in a plain store lose an update, while the same graphs committing through the
gateway's state (`SharedState.transact`: a stale commit is refused and retried) lose none.
A barrier makes both runs read before either writes, so each outcome is deterministic.
"""

from __future__ import annotations

import json
import operator
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import anyio
import pytest
from langgraph.errors import InvalidUpdateError
from langgraph.graph import END, START, StateGraph
from redis import Redis

from agents import GatewayClient
from agents.langgraph import TeamState, shared_state_node
from agents.shared_state import SharedState, Values
from conclave.stack import EmbeddedStack
from gateway.config import Settings
from gateway.state.checker import check_history
from protocol.agents import AgentRegistration
from protocol.state import NamespaceConfig

pytestmark = [pytest.mark.anyio, pytest.mark.system]  # starts stacks in its tests' bodies


def keep_last(_old: int, new: int) -> int:
    """A last-value reducer: LangGraph ships none; a user may write one like this."""
    return new


class KeepLastState(TypedDict):
    counter: Annotated[int, keep_last]


class LastValueState(TypedDict):
    counter: int


class AppendState(TypedDict):
    names: Annotated[list[str], operator.add]


def parallel_branches(state_type: type[Any], write: Any) -> Any:
    graph = StateGraph(state_type)
    for branch in ("a", "b"):
        graph.add_node(branch, lambda state, branch=branch: write(state, branch))
        graph.add_edge(START, branch)
        graph.add_edge(branch, END)
    return graph.compile()


async def test_langgraph_refuses_or_merges_parallel_writes_to_one_key_in_a_run() -> None:
    def increment(state: Any, _branch: str) -> dict[str, int]:
        return {"counter": state["counter"] + 1}

    with pytest.raises(InvalidUpdateError, match="Can receive only one value per step"):
        await parallel_branches(LastValueState, increment).ainvoke({"counter": 0})
    appended = await parallel_branches(AppendState, lambda _s, b: {"names": [b]}).ainvoke(
        {"names": []}
    )
    assert sorted(appended["names"]) == ["a", "b"]  # the reducer kept both writes
    # a last-value reducer, written by the user, keeps one increment and drops the other
    final = await parallel_branches(KeepLastState, increment).ainvoke({"counter": 0})
    assert final["counter"] == 1


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


# One agent's graph runs in its own process: START -> sign -> END, where `sign` appends this
# run's name to the shared list `names`: straight in Redis (GET, then SET), or through the
# gateway as a transaction (read, then commit with the version read) or as an `append` op.
# The process runs the graph once per (mode, key) pair given, in order, and prints each final
# state; the two processes' runs of one pair meet at a barrier after their first read, so
# both read before either writes. (One process per agent, not per run: each costs seconds of
# imports.)
GRAPH_RUN = textwrap.dedent(
    """
    import asyncio, json, sys, time
    from typing import TypedDict

    import redis
    from langgraph.graph import END, START, StateGraph

    from agents import GatewayClient, SharedState
    from protocol import CommitRequest, Write

    redis_url, gateway_url, name, token, *pairs = sys.argv[1:]
    store = redis.Redis.from_url(redis_url)
    met = False
    key = ""

    def meet_the_other_run() -> None:
        global met
        if met:
            return
        met = True
        store.incr(key + ":barrier")
        deadline = time.monotonic() + 30
        while int(store.get(key + ":barrier")) < 2:
            assert time.monotonic() < deadline, "the other run never read"
            time.sleep(0.005)

    class Run(TypedDict, total=False):
        name: str
        attempts: int

    async def sign_in_redis(state: Run) -> Run:
        names = json.loads(store.get(key) or "[]")
        meet_the_other_run()
        store.set(key, json.dumps([*names, state["name"]]))
        return {"attempts": 1}

    async def sign_through_gateway(state: Run) -> Run:
        def add(current: dict) -> dict:
            meet_the_other_run()
            return {"names": [*(current.get("names") or []), state["name"]]}

        async with GatewayClient(gateway_url, token) as client:
            done = await SharedState(client, key).transact(["names"], add)
        return {"attempts": done.attempts}

    async def append_through_gateway(state: Run) -> Run:
        async with GatewayClient(gateway_url, token) as client:
            meet_the_other_run()  # an append reads nothing: the op applies to what is stored
            append = Write(key="names", op="append", value=state["name"])
            await client.commit(key, CommitRequest(writes=[append]))
        return {"attempts": 1}

    nodes = {"redis": sign_in_redis, "transact": sign_through_gateway}
    finals = []
    for mode, key in zip(pairs[::2], pairs[1::2]):
        met = False
        graph = StateGraph(Run)
        graph.add_node("sign", nodes.get(mode, append_through_gateway))
        graph.add_edge(START, "sign")
        graph.add_edge("sign", END)
        finals.append(asyncio.run(graph.compile().ainvoke({"name": name})))
    print(json.dumps(finals))
    """
)


@pytest.fixture(scope="module")
def stack(redis_url: str) -> Iterator[EmbeddedStack]:
    settings = Settings(
        redis_url=redis_url,
        port=0,
        sandbox_backend="process",
        secret="langgraph-secret-" + "l" * 32,
        admin_key="langgraph-admin-key",
    )
    with EmbeddedStack(settings) as running:
        yield running


def run_two_graphs(
    script: Path, redis_url: str, gateway_url: str, pairs: list[str], tokens: dict[str, str]
) -> list[list[dict[str, Any]]]:
    """One OS process per agent, each running the graph once per (mode, key) of `pairs`; per
    process, the final graph state of each run."""
    runs = [
        subprocess.Popen(
            [sys.executable, str(script), redis_url, gateway_url, name, token, *pairs],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, token in tokens.items()
    ]
    finals = []
    for run in runs:
        out, err = run.communicate(timeout=240)  # three graph runs, after seconds of imports
        assert run.returncode == 0, err
        finals.append(json.loads(out))
    return finals


async def test_two_graph_runs_in_two_processes_lose_an_update_unless_they_use_the_gateway(
    stack: EmbeddedStack, redis_url: str, tmp_path: Path
) -> None:
    script = tmp_path / "graph_run.py"
    script.write_text(GRAPH_RUN)
    run = uuid.uuid4().hex[:8]
    plain_key, namespace, appended = f"plain-names-{run}", f"names-{run}", f"appended-{run}"
    tokens: dict[str, str] = {}
    async with GatewayClient(stack.url, admin_key="langgraph-admin-key") as admin:
        for name in ("alice", "bob"):
            registration = AgentRegistration(
                tenant="acme",
                agent=f"{name}-{run}",
                namespaces={namespace: "write", appended: "write"},
            )
            tokens[name] = (await admin.register_agent(registration)).token
    async with GatewayClient(stack.url, tokens["alice"]) as alice:
        await alice.create_namespace(namespace, NamespaceConfig())
        await alice.create_namespace(appended, NamespaceConfig())

        pairs = ["redis", plain_key, "transact", namespace, "append", appended]
        finals = await anyio.to_thread.run_sync(
            run_two_graphs, script, redis_url, stack.url, pairs, tokens
        )
        plain, guarded = [run[0] for run in finals], [run[1] for run in finals]
        names = await alice.read(namespace, "names")
        appends = await alice.read(appended, "names")

    store = Redis.from_url(redis_url)
    lost = json.loads(store.get(plain_key) or "[]")
    store.close()
    # straight on Redis: both runs read [], each wrote [itself]; the later SET erased the other
    assert len(lost) == 1 and lost[0] in ("alice", "bob"), lost
    assert [final["attempts"] for final in plain] == [1, 1]
    # through the gateway: the second commit was refused (409), reread and retried
    assert sorted(names.value) == ["alice", "bob"] and names.version == 2
    assert sorted(final["attempts"] for final in guarded) == [1, 2]
    # an append op applies to the stored list inside the commit: nothing to be stale about
    assert sorted(appends.value) == ["alice", "bob"] and appends.version == 2
