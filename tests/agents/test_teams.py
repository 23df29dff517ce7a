"""Team topologies on the real gateway, with scripted models."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from agents import Agent, ChatReply, GatewayClient, ScriptedCall, ScriptedModel, local_tool
from agents.models.base import Message, ToolDefinition
from agents.teams import centralized, decentralized, independent
from protocol import CommitRequest, NamespaceConfig, Write
from tests.agents.team_append import team_append_run, team_append_runs

pytestmark = pytest.mark.anyio


class BetweenTurns:
    """A scripted model that runs `action` once, after its first `turns` turns."""

    def __init__(
        self, inner: ScriptedModel, turns: int, action: Callable[[], Awaitable[None]]
    ) -> None:
        self.inner, self.turns, self.action, self.done = inner, turns, action, False

    @property
    def name(self) -> str:
        return "scripted"

    async def complete(
        self, messages: list[Message], tools: list[ToolDefinition] | None = None
    ) -> ChatReply:
        if self.inner.turns == self.turns and not self.done:
            self.done = True
            await self.action()
        return await self.inner.complete(messages, tools)


def echo_task(messages: list[Message]) -> list[ScriptedCall]:
    return [ScriptedCall("echo", {"message": messages[-1]["content"]})]


def answer_with_tool_result(messages: list[Message]) -> str:
    return str(json.loads(messages[-1]["content"]))


def echo_worker(name: str) -> Agent:
    model = ScriptedModel([echo_task, answer_with_tool_result])
    return Agent(name, "Echo your task.", model, tools=["echo"])


async def test_a_planner_splits_the_task_and_workers_take_one_part_each(
    admin: GatewayClient,
) -> None:
    planner = Agent("planner", "Split the task.", ScriptedModel(["- draft intro\n- draft outro"]))
    team = centralized(planner, [echo_worker("w1"), echo_worker("w2")])
    await team.register(admin)
    final = await team.run("write a talk")
    await team.aclose()
    answers = {a["agent"]: a["answer"] for a in final["answers"]}
    assert answers == {
        "planner": "- draft intro\n- draft outro",
        "w1": "draft intro",
        "w2": "draft outro",
    }


async def test_independent_agents_each_get_the_same_task(admin: GatewayClient) -> None:
    team = independent([echo_worker("x"), echo_worker("y")])
    await team.register(admin)
    final = await team.run("same")
    await team.aclose()
    assert sorted((a["agent"], a["answer"]) for a in final["answers"]) == [
        ("x", "same"),
        ("y", "same"),
    ]


async def test_peers_share_state_through_the_gateway(admin: GatewayClient) -> None:
    def peer(name: str, key: str) -> Agent:
        model = ScriptedModel(
            [
                [ScriptedCall("shared_update", {"key": key, "value": f"by {name}", "version": 0})],
                [ScriptedCall("shared_read", {"key": "a" if key == "b" else "b"})],
                "done",
            ]
        )
        return Agent(name, "Work on the shared notes.", model)

    team = decentralized([peer("p1", "a"), peer("p2", "b")], "notes")
    await team.register(admin)
    final = await team.run("take notes")
    assert team.agents[0].client is not None
    history = await team.agents[0].client.history("notes")
    await team.aclose()
    runs = {x["agent"]: x for x in final["answers"]}
    assert runs["p1"]["stopped"] == runs["p2"]["stopped"] == "answered"
    assert (runs["p1"]["tool_calls"], runs["p2"]["tool_calls"]) == (2, 2)
    # both writes landed once each, under each peer's own identity
    assert sorted((e.agent, tuple(e.keys)) for e in history) == [("p1", ("a",)), ("p2", ("b",))]


async def test_racing_peers_keep_both_names_with_shared_update_in_100_seeded_runs(
    admin: GatewayClient,
) -> None:
    # both peers read the list before either writes; the seed picks who writes first
    runs = [await team_append_run(admin, "update", seed) for seed in range(100)]
    assert [sorted(run.names) for run in runs] == [["alice", "bob"]] * 100
    assert [run.redone for run in runs] == [1] * 100  # the second writer redid its update


async def test_racing_peers_keep_both_names_with_shared_append_in_100_seeded_runs(
    admin: GatewayClient,
) -> None:
    runs = [await team_append_run(admin, "append", seed) for seed in range(100)]
    assert [sorted(run.names) for run in runs] == [["alice", "bob"]] * 100
    assert [run.redone for run in runs] == [0] * 100  # concurrent appends never conflict


async def test_the_bench_counts_runs_keeping_both_names(admin: GatewayClient) -> None:
    result = await team_append_runs(admin, runs=3, seed=7)
    assert (result.update, result.append) == ((3, 3), (3, 3))


async def test_a_stale_shared_update_writes_nothing_and_shows_the_current_value(
    admin: GatewayClient,
) -> None:
    other = Agent("other", "Write.", ScriptedModel([]), namespaces={"board": "write"})
    await other.register(admin)
    assert other.client is not None
    await other.client.create_namespace("board", NamespaceConfig())

    async def other_writes_between() -> None:
        assert other.client is not None
        await other.client.commit("board", CommitRequest(writes=[Write(key="todo", value=["x"])]))

    def update_from_last_result(messages: list[Message]) -> list[ScriptedCall]:
        seen = json.loads(messages[-1]["content"])
        arguments = {"key": "todo", "value": [*(seen["value"] or []), "mine"]}
        return [ScriptedCall("shared_update", {**arguments, "version": seen["version"]})]

    steps: list[Any] = [
        [ScriptedCall("shared_read", {"key": "todo"})],
        update_from_last_result,  # from the read: stale by then
        update_from_last_result,  # from what the refusal showed
        "done",
    ]
    model = BetweenTurns(ScriptedModel(steps), 1, other_writes_between)
    writer = Agent("writer", "Add to the list.", model)
    team = decentralized([writer], "board")
    await writer.register(admin)
    run = await writer.run("add 'mine'")
    history = await other.client.history("board")
    final = await other.client.read("board", "todo")
    await team.aclose()
    await other.aclose()
    refused, redone = run.calls[1].result, run.calls[2].result
    assert (refused["committed"], refused["value"], refused["version"]) == (False, ["x"], 1)
    assert "redo your update" in refused["hint"].lower()
    assert redone["committed"] is True
    assert (final.value, final.version) == (["x", "mine"], 2)
    assert [entry.agent for entry in history] == ["other", "writer"]  # no blind write


async def test_decentralized_keeps_each_peers_own_tools_and_adds_the_teams(
    admin: GatewayClient,
) -> None:
    @local_tool
    def mood() -> str:
        """The peer's own tool."""
        return "calm"

    @local_tool
    def clock() -> int:
        """A tool the whole team gets."""
        return 42

    calls = [ScriptedCall("mood"), ScriptedCall("clock"), ScriptedCall("shared_read", {"key": "k"})]
    peer = Agent("solo", "Use your tools.", ScriptedModel([calls, "done"]), local_tools=[mood])
    team = decentralized([peer], "tools-team", tools=[clock])
    await team.register(admin)
    run = await peer.run("go")
    await team.aclose()
    assert [(c.tool, c.result, c.error) for c in run.calls] == [
        ("mood", "calm", None),
        ("clock", 42, None),
        ("shared_read", {"key": "k", "value": None, "version": 0}, None),
    ]
