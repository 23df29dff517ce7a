"""`@local_tool`: a typed function becomes a tool the agent runs itself, described like `@tool`."""

from __future__ import annotations

import json

import pytest

from agents import Agent, GatewayClient, ScriptedCall, ScriptedModel, local_tool
from agents.models.base import Message
from tools import ToolRegistry, tool

pytestmark = pytest.mark.anyio


def last_tool_result(messages: list[Message]) -> object:
    return json.loads(next(m for m in reversed(messages) if m["role"] == "tool")["content"])


def convert(amount: float, currency: str = "EUR") -> str:
    """Convert an amount of US dollars to another currency."""
    return f"{amount * 0.9:.2f} {currency}"


async def lookup(city: str) -> dict[str, object]:
    """Look a city's weather up."""
    return {"city": city, "celsius": 21}


def test_the_definition_is_the_one_tool_builds_from_the_signature_and_docstring() -> None:
    registry = ToolRegistry()
    tool(registry=registry)(convert)
    spec = registry.get("convert")
    assert spec is not None
    assert local_tool(convert).definition == {
        "type": "function",
        "function": {
            "name": "convert",
            "description": "Convert an amount of US dollars to another currency.",
            "parameters": spec.spec.input_schema,
        },
    }
    assert spec.spec.input_schema["required"] == ["amount"]
    renamed = local_tool(name="fx", description="Dollars to euros.")(convert)
    assert (renamed.name, renamed.definition["function"]["description"]) == (
        "fx",
        "Dollars to euros.",
    )


async def test_the_agent_calls_sync_and_async_local_tools_with_the_models_arguments(
    admin: GatewayClient,
) -> None:
    calls = [ScriptedCall("convert", {"amount": 10}), ScriptedCall("lookup", {"city": "Oslo"})]
    model = ScriptedModel([calls, lambda messages: f"saw {last_tool_result(messages)}"])
    agent = Agent(
        "planner", "Plan a trip.", model, local_tools=[local_tool(convert), local_tool(lookup)]
    )
    await agent.register(admin)
    run = await agent.run("trip to Oslo")
    await agent.aclose()
    assert [(c.tool, c.result, c.error) for c in run.calls] == [
        ("convert", "9.00 EUR", None),
        ("lookup", {"city": "Oslo", "celsius": 21}, None),
    ]
    assert run.answer == "saw {'city': 'Oslo', 'celsius': 21}"


async def test_arguments_that_do_not_fit_reach_the_model_as_invalid_arguments_with_hints(
    admin: GatewayClient,
) -> None:
    def read_refusal(messages: list[Message]) -> str:
        error = last_tool_result(messages)["error"]  # type: ignore[index]
        return f"{error['code']} {sorted(error['param_hints'])}"

    model = ScriptedModel([[ScriptedCall("convert", {"amount": "lots", "rate": 2})], read_refusal])
    agent = Agent("sloppy", "Convert.", model, local_tools=[local_tool(convert)])
    await agent.register(admin)
    run = await agent.run("convert")
    await agent.aclose()
    assert run.answer == "INVALID_ARGUMENTS ['amount', 'rate']"
    assert run.calls[0].result is None
