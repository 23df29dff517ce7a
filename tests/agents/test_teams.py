"""Team topologies on the real gateway, with scripted models."""

from __future__ import annotations

import json

import pytest

from agents import Agent, GatewayClient, ScriptedCall, ScriptedModel
from agents.models.base import Message
from agents.teams import centralized, decentralized, independent

pytestmark = pytest.mark.anyio


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
                [ScriptedCall("shared_update", {"key": key, "value": f"by {name}"})],
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
