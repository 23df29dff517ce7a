"""The agent loop against the real gateway, driven by a scripted model."""

from __future__ import annotations

import json

import pytest

from agents import Agent, AgentBudget, GatewayClient, ScriptedCall, ScriptedModel
from agents.models.base import Message

pytestmark = pytest.mark.anyio


def last_tool_result(messages: list[Message]) -> object:
    return json.loads(next(m for m in reversed(messages) if m["role"] == "tool")["content"])


async def test_a_tool_result_goes_back_to_the_model_until_it_answers(admin: GatewayClient) -> None:
    model = ScriptedModel(
        [
            [ScriptedCall("echo", {"message": "ping"})],
            lambda messages: f"the tool said {last_tool_result(messages)}",
        ]
    )
    agent = Agent("greeter", "Use echo.", model, tools=["echo"])
    await agent.register(admin)
    run = await agent.run("say ping")
    await agent.aclose()
    assert (run.answer, run.stopped, run.turns) == ("the tool said ping", "answered", 2)
    assert [(c.tool, c.result, c.error) for c in run.calls] == [("echo", "ping", None)]
    assert run.calls[0].client_ms >= run.calls[0].tool_ms


async def test_a_refusal_reaches_the_model_as_a_serf_envelope(admin: GatewayClient) -> None:
    def read_refusal(messages: list[Message]) -> str:
        error = last_tool_result(messages)["error"]  # type: ignore[index]
        return f"{error['code']} -> {error['action']}"

    model = ScriptedModel([[ScriptedCall("run_shell", {"command": "id"})], read_refusal])
    agent = Agent("careful", "Try the shell.", model, tools=["echo"])
    await agent.register(admin)
    run = await agent.run("who am I?")
    await agent.aclose()
    assert run.answer == "TOOL_NOT_ALLOWED -> switch_tool"
    assert run.calls[0].error is not None and run.calls[0].result is None


async def test_the_turn_budget_stops_a_model_that_never_answers(admin: GatewayClient) -> None:
    forever = [[ScriptedCall("echo", {"message": str(i)})] for i in range(10)]
    agent = Agent("chatty", "Loop.", ScriptedModel(forever), tools=["echo"])
    agent.budget = AgentBudget(max_turns=3)
    await agent.register(admin)
    run = await agent.run("go")
    await agent.aclose()
    assert (run.answer, run.stopped, run.turns, len(run.calls)) == (None, "turns", 3, 3)


async def test_an_expired_deadline_stops_before_the_model_is_asked(admin: GatewayClient) -> None:
    model = ScriptedModel(["never"])
    agent = Agent("late", "Answer.", model, tools=["echo"], budget=AgentBudget(deadline_s=-1))
    await agent.register(admin)
    run = await agent.run("go")
    await agent.aclose()
    assert (run.stopped, run.turns, model.turns) == ("deadline", 0, 0)
