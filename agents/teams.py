"""Ready-made team topologies, each a LangGraph `StateGraph` over `TeamState`.

- `single`: one agent.
- `independent`: every agent gets the same task, in parallel; nobody sees anyone else.
- `centralized`: a planner splits the task (one subtask per line of its answer), workers
  take one subtask each, in parallel.
- `decentralized`: peers run in parallel on one shared namespace, through `shared_read` and
  `shared_update` tools backed by the gateway's store (conflicts are retried, not lost).

`Team.register(admin)` gives every agent its own identity; `Team.run(task)` runs the graph.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from langgraph.graph import END, START, StateGraph

from agents.agent import Agent
from agents.client import GatewayClient
from agents.langgraph import GraphState, TeamState, agent_node
from agents.loop import LocalTool
from agents.shared_state import SharedState
from protocol import NamespaceConfig


@dataclass
class Team:
    topology: str
    agents: list[Agent]
    graph: Any  # a compiled LangGraph graph
    namespace: str | None = None

    async def register(self, admin: GatewayClient) -> None:
        """Give every agent its identity; create the team's namespace (idempotent)."""
        for agent in self.agents:
            await agent.register(admin)
        if self.namespace is not None and self.agents[0].client is not None:
            await self.agents[0].client.create_namespace(self.namespace, NamespaceConfig())

    async def run(self, task: str) -> dict[str, Any]:
        result: dict[str, Any] = await self.graph.ainvoke({"task": task})
        return result

    async def aclose(self) -> None:
        for agent in self.agents:
            await agent.aclose()


def _fan_out(graph: StateGraph[Any], source: str, agents: list[Agent], prompt: Any = None) -> None:
    for index, agent in enumerate(agents):
        graph.add_node(agent.name, agent_node(agent, prompt(index) if prompt else None))
        graph.add_edge(source, agent.name)
        graph.add_edge(agent.name, END)


def single(agent: Agent) -> Team:
    graph = StateGraph(TeamState)
    _fan_out(graph, START, [agent])
    return Team("single", [agent], graph.compile())


def independent(agents: list[Agent]) -> Team:
    graph = StateGraph(TeamState)
    _fan_out(graph, START, agents)
    return Team("independent", agents, graph.compile())


def subtasks(state: GraphState) -> list[str]:
    """The planner's answer, one subtask per non-empty line."""
    plans = [a for a in state.get("answers", []) if a.get("role") == "planner"]
    text = (plans[-1]["answer"] if plans else "") or ""
    return [line.strip(" -*\t") for line in text.splitlines() if line.strip(" -*\t")]


def centralized(planner: Agent, workers: list[Agent]) -> Team:
    graph = StateGraph(TeamState)
    plan = agent_node(planner)

    async def planner_node(state: Any) -> GraphState:
        produced = await plan(state)
        return {"answers": [{**produced["answers"][0], "role": "planner"}]}

    def worker_prompt(index: int) -> Callable[[GraphState], str]:
        def prompt(state: GraphState) -> str:
            parts = subtasks(state) or [str(state.get("task", ""))]
            return parts[index % len(parts)]

        return prompt

    graph.add_node(planner.name, planner_node)
    graph.add_edge(START, planner.name)
    _fan_out(graph, planner.name, workers, worker_prompt)
    return Team("centralized", [planner, *workers], graph.compile())


def shared_tools(shared: SharedState) -> list[LocalTool]:
    """`shared_read` and `shared_update` over one namespace, for agents working as peers."""

    async def read(arguments: dict[str, Any]) -> Any:
        return await shared.get(str(arguments["key"]))

    async def update(arguments: dict[str, Any]) -> Any:
        key, value = str(arguments["key"]), arguments.get("value")
        done = await shared.transact([key], lambda _current: {key: value})
        return {"key": key, "version": done.versions.get(key), "conflicts": done.conflicts}

    key_schema = {"key": {"type": "string"}}

    def definition(name: str, description: str, properties: dict[str, Any]) -> dict[str, Any]:
        schema = {"type": "object", "properties": properties, "required": list(properties)}
        return {
            "type": "function",
            "function": {"name": name, "description": description, "parameters": schema},
        }

    return [
        LocalTool(definition("shared_read", "Read a key of the team's state", key_schema), read),
        LocalTool(
            definition(
                "shared_update",
                "Write a JSON value to a key of the team's state",
                {**key_schema, "value": {}},
            ),
            update,
        ),
    ]


def decentralized(peers: list[Agent], namespace: str) -> Team:
    for peer in peers:
        peer.namespaces.setdefault(namespace, "write")
    graph = StateGraph(TeamState)
    for peer in peers:
        node = agent_node(peer)

        async def peer_node(state: Any, peer: Agent = peer, node: Any = node) -> GraphState:
            # Tools bind to the peer's own client, which exists only once it is registered.
            assert peer.client is not None, f"register {peer.name} first"
            peer.local_tools = shared_tools(SharedState(peer.client, namespace))
            produced: GraphState = await node(state)
            return produced

        graph.add_node(peer.name, peer_node)
        graph.add_edge(START, peer.name)
        graph.add_edge(peer.name, END)
    return Team("decentralized", peers, graph.compile(), namespace)
