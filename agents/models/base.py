"""The one interface every model provider implements: OpenAI-format messages in, a reply out.

Messages and tool definitions are plain dicts in the OpenAI chat-completions shape, because
that is what every provider (OpenAI, vLLM, Ollama, llama.cpp's server) speaks; the reply is
a small frozen dataclass so the agent loop never digs through a provider's JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

Message = dict[str, Any]
ToolDefinition = dict[str, Any]


class ModelError(RuntimeError):
    """A model provider failed (unreachable, refused, or answered something unreadable)."""


@dataclass(frozen=True)
class ToolCall:
    """One call the model proposes: the provider's id, the tool's name, decoded arguments."""

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def as_message_part(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": json.dumps(self.arguments)},
        }


@dataclass(frozen=True)
class ChatReply:
    """What a model answered: text, tool calls, or both; plus token usage when known."""

    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def as_message(self) -> Message:
        message: Message = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [call.as_message_part() for call in self.tool_calls]
        return message


@runtime_checkable
class ChatModel(Protocol):
    """A chat model that may propose tool calls (OpenAI tool-calling format)."""

    @property
    def name(self) -> str: ...

    async def complete(
        self, messages: list[Message], tools: list[ToolDefinition] | None = None
    ) -> ChatReply: ...


def decode_arguments(raw: object) -> dict[str, Any]:
    """Tool-call arguments arrive as a JSON string (OpenAI) or an object (some servers)."""
    if isinstance(raw, dict):
        return raw
    if raw in (None, ""):
        return {}
    try:
        decoded = json.loads(str(raw))
    except json.JSONDecodeError as exc:
        raise ModelError(f"the model's tool arguments are not JSON: {raw!r}") from exc
    if not isinstance(decoded, dict):
        raise ModelError(f"the model's tool arguments are not an object: {raw!r}")
    return decoded
