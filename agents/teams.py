"""Ready-made team topologies, each a LangGraph `StateGraph` over `TeamState`.

- `single`: one agent.
- `independent`: every agent gets the same task, in parallel; nobody sees anyone else.
- `centralized`: a planner splits the task (one subtask per line of its answer), workers
  take one subtask each, in parallel.
- `decentralized`: peers run in parallel on one shared namespace, through the team tools
  `shared_read`, `shared_update` and `shared_append` backed by the gateway's store.

Every topology keeps each agent's own `local_tools` and adds the `tools` it is given.
`Team.register(admin)` gives every agent its own identity; `Team.run(task)` runs the graph.

The team tools carry what the model saw: `shared_read` answers a key's value and version,
and `shared_update` commits only against the version the model passes back (declared as
read and expected). When another agent wrote the key in between, nothing is written and
the tool answers the current value and version, for the model to redo its update from;
nothing is ever written blind. `shared_append` adds an item to a list with the store's
commutative `append`, which concurrent appends cannot conflict on.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langgraph.constants import END, START

from agents.agent import Agent
from agents.agent_errors import StateConflict
from agents.client import GatewayClient
from agents.langgraph import GraphState, TeamState, agent_node
from agents.local_tool import local_tool
from agents.loop import LocalTool, current_client
from protocol import CommitRequest, ErrorCode, NamespaceConfig, StateOp, Write

if TYPE_CHECKING:
    from langgraph.graph import StateGraph

_CHANGED = "Nothing was written: another agent changed the key(s) below since you read them."
_REDO_UPDATE = (
    f"{_CHANGED} Redo your update from the current value and version shown (call"
    " shared_update again with that version); read any other key listed again with"
    " shared_read before relying on it."
)
_REDO_APPEND = f"{_CHANGED} Read them again with shared_read, then call shared_append again."


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


def _equip(agents: list[Agent], tools: list[LocalTool] | None) -> list[Agent]:
    """Give each agent `tools` besides its own local tools (one of the same name is replaced)."""
    names = {tool.name for tool in tools or []}
    for agent in agents:
        own = [tool for tool in agent.local_tools if tool.name not in names]
        agent.local_tools = [*own, *(tools or [])]
    return agents


def _graph() -> StateGraph[Any]:
    """A new graph over `TeamState`. langgraph's graph module is imported here, when a team is
    built, not with the SDK: it takes about half a second, which every `conclave` command
    (and every program importing `agents`) would otherwise pay."""
    from langgraph.graph import StateGraph

    return StateGraph(TeamState)


def _fan_out(graph: StateGraph[Any], source: str, agents: list[Agent], prompt: Any = None) -> None:
    for index, agent in enumerate(agents):
        graph.add_node(agent.name, agent_node(agent, prompt(index) if prompt else None))
        graph.add_edge(source, agent.name)
        graph.add_edge(agent.name, END)


def single(agent: Agent, tools: list[LocalTool] | None = None) -> Team:
    graph = _graph()
    _fan_out(graph, START, _equip([agent], tools))
    return Team("single", [agent], graph.compile())


def independent(agents: list[Agent], tools: list[LocalTool] | None = None) -> Team:
    graph = _graph()
    _fan_out(graph, START, _equip(agents, tools))
    return Team("independent", agents, graph.compile())


def subtasks(state: GraphState) -> list[str]:
    """The planner's answer, one subtask per non-empty line."""
    plans = [a for a in state.get("answers", []) if a.get("role") == "planner"]
    text = (plans[-1]["answer"] if plans else "") or ""
    return [line.strip(" -*\t") for line in text.splitlines() if line.strip(" -*\t")]


def centralized(planner: Agent, workers: list[Agent], tools: list[LocalTool] | None = None) -> Team:
    graph = _graph()
    _equip([planner, *workers], tools)
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


async def _commit(
    namespace: str, key: str, write: Write, read_set: dict[str, int], redo: str
) -> dict[str, Any]:
    """Commit one write in the calling run's session; a conflict is answered, not raised."""
    request = CommitRequest(writes=[write], read_set=read_set, idempotency_key=uuid.uuid4().hex)
    try:
        result = await current_client().commit(namespace, request)
    except StateConflict as exc:
        if exc.code != ErrorCode.STATE_CONFLICT:
            raise
        stale = {
            c["key"]: {"value": c.get("current_value"), "version": c.get("current_version")}
            for c in exc.serf.details.get("conflicts", [])
        }
        current = stale.get(key, {})
        return {"committed": False, "key": key, **current, "stale": stale, "hint": redo}
    return {"committed": True, "key": key, "version": result.versions[key]}


def shared_tools(namespace: str) -> list[LocalTool]:
    """The team tools over `namespace`: `shared_read`, `shared_update`, `shared_append`.

    They act through the calling run's client (`current_client()`), so under the calling
    agent's identity and in its run's session; any agent may carry them."""

    @local_tool
    async def shared_read(key: str) -> dict[str, Any]:
        """Read a key of the team's shared state: its value and its version (0: no such
        key yet). Pass that version to shared_update."""
        read = await current_client().read(namespace, key)
        return {"key": key, "value": read.value, "version": read.version}

    @local_tool
    async def shared_update(key: str, value: Any, version: int) -> dict[str, Any]:
        """Write a JSON value to a key of the team's shared state. `version` is the version
        shared_read returned for the value you computed from; if the key changed since,
        nothing is written and you get its current value and version to redo your update."""
        write = Write(key=key, value=value, expected_version=version)
        return await _commit(namespace, key, write, {key: version}, _REDO_UPDATE)

    @local_tool
    async def shared_append(key: str, item: Any) -> dict[str, Any]:
        """Append an item to the list at a key of the team's shared state (creating it):
        atomic, so appends by several agents at once all land; no read needed."""
        write = Write(key=key, value=item, op=StateOp.APPEND)
        return await _commit(namespace, key, write, {}, _REDO_APPEND)

    return [shared_read, shared_update, shared_append]


def decentralized(peers: list[Agent], namespace: str, tools: list[LocalTool] | None = None) -> Team:
    """Peers in parallel on `namespace`: each keeps its own local tools and gets `tools`
    and the team tools (`shared_tools(namespace)`)."""
    for peer in peers:
        peer.namespaces.setdefault(namespace, "write")
    graph = _graph()
    _fan_out(graph, START, _equip(peers, [*(tools or []), *shared_tools(namespace)]))
    return Team("decentralized", peers, graph.compile(), namespace)
