"""LangGraph glue: agents as `StateGraph` nodes, shared state kept in the gateway's store.

Within one graph run LangGraph handles parallel branches' writes to a channel itself: a
plain (last-value) channel refuses two writes in one step (`InvalidUpdateError`), and a
reducer merges them (`operator.add` keeps both; a last-value reducer a user writes keeps
one). Separate runs, in other processes, share nothing LangGraph can check. Here the data
branches and runs share does not live in LangGraph channels at all: each node reads and
commits it through the gateway as its own agent (`SharedState.transact`), so two updates of
the same key, from one run or from two, get a 409 and a retry, and both land. The LangGraph
state carries only what the graph routes on (answers, commit records), with append
reducers, so nothing in it can be lost either.
"""

from __future__ import annotations

import operator
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Protocol, TypedDict

from agents.agent import Agent
from agents.shared_state import SharedState, Update

GraphState = dict[str, Any]


class Node(Protocol):
    """A graph node; LangGraph matches nodes by the parameter name `state`."""

    def __call__(self, state: Any) -> Awaitable[GraphState]: ...


class TeamState(TypedDict, total=False):
    """Graph state for teams: the task, and append-only records of what each node did."""

    task: str
    answers: Annotated[list[dict[str, Any]], operator.add]
    commits: Annotated[list[dict[str, Any]], operator.add]


def shared_state_node(name: str, shared: SharedState, keys: list[str], update: Update) -> Node:
    """A node that applies `update` to `keys` in the gateway's store, retrying on conflict."""

    async def node(state: Any) -> GraphState:
        result = await shared.transact(keys, update)
        record = {
            "node": name,
            "versions": result.versions,
            "attempts": result.attempts,
            "conflicts": result.conflicts,
        }
        return {"commits": [record]}

    node.__name__ = name
    return node


def agent_node(
    agent: Agent,
    prompt: Callable[[GraphState], str] | None = None,
) -> Node:
    """A node that runs `agent` on the graph's task (or `prompt(state)`) and records its answer."""

    async def node(state: Any) -> GraphState:
        task = prompt(state) if prompt is not None else str(state.get("task", ""))
        run = await agent.run(task)
        answer = {
            "agent": agent.name,
            "answer": run.answer,
            "stopped": run.stopped,
            "tool_calls": len(run.calls),
        }
        return {"answers": [answer]}

    node.__name__ = agent.name
    return node
