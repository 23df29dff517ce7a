"""OpenAICompatible against a real local HTTP server speaking the chat-completions format."""

from __future__ import annotations

from typing import Any

import pytest

from agents.models import ModelError, OpenAICompatible, ToolCall

pytestmark = pytest.mark.anyio

ECHO_TOOL = {
    "type": "function",
    "function": {
        "name": "echo",
        "description": "Return the message",
        "parameters": {"type": "object", "properties": {"message": {"type": "string"}}},
    },
}


async def test_a_tool_call_is_proposed_and_its_result_answered(chat_server: Any) -> None:
    model = OpenAICompatible(chat_server.url, "tiny", api_key="sk-test")
    messages = [{"role": "user", "content": "hello"}]
    first = await model.complete(messages, [ECHO_TOOL])
    assert first.tool_calls == (ToolCall("call_a", "echo", {"message": "hello"}),)
    assert (first.prompt_tokens, first.completion_tokens) == (11, 7)

    messages.append(first.as_message())
    messages.append({"role": "tool", "tool_call_id": "call_a", "content": '"hello"'})
    second = await model.complete(messages)
    await model.aclose()
    assert second.content == 'done: "hello"' and second.tool_calls == ()

    headers, body = chat_server.requests[0]
    assert headers["Authorization"] == "Bearer sk-test"
    assert body["model"] == "tiny" and body["tools"] == [ECHO_TOOL]
    # the assistant's tool call went back in the OpenAI wire shape, arguments as a string
    sent_call = chat_server.requests[1][1]["messages"][1]["tool_calls"][0]
    assert sent_call["function"] == {"name": "echo", "arguments": '{"message": "hello"}'}


async def test_an_error_answer_becomes_a_model_error_naming_it(chat_server: Any) -> None:
    model = OpenAICompatible(chat_server.url, "missing")
    with pytest.raises(ModelError, match=r"answered 404.*not found"):
        await model.complete([{"role": "user", "content": "hi"}])
    await model.aclose()


async def test_an_unreachable_endpoint_names_the_fix() -> None:
    model = OpenAICompatible("http://127.0.0.1:9/v1", "any", timeout_s=2)
    with pytest.raises(ModelError, match="not reachable"):
        await model.complete([{"role": "user", "content": "hi"}])
    await model.aclose()
