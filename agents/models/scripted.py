"""`ScriptedModel`: deterministic replies for tests and oracle replays.

A script is a list of steps; each step is an answer (a string) or the tool calls to propose
(a list of `ScriptedCall`). A step may also be a function of the conversation so far, which
is how an oracle reads earlier tool results before deciding its next call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents.models.base import ChatReply, Message, ModelError, ToolCall, ToolDefinition


@dataclass(frozen=True)
class ScriptedCall:
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


Step = str | Sequence[ScriptedCall] | Callable[[list[Message]], "str | Sequence[ScriptedCall]"]


class ScriptedModel:
    """Replays its steps in order, one per `complete` call; past the end it answers `final`."""

    def __init__(self, steps: Sequence[Step], *, final: str | None = None) -> None:
        self._steps = list(steps)
        self._final = final
        self._position = 0
        self._call_ids = 0

    @property
    def name(self) -> str:
        return "scripted"

    @property
    def turns(self) -> int:
        return self._position

    async def complete(
        self, messages: list[Message], tools: list[ToolDefinition] | None = None
    ) -> ChatReply:
        if self._position >= len(self._steps):
            if self._final is None:
                raise ModelError(f"the script has only {len(self._steps)} steps")
            return ChatReply(content=self._final)
        step = self._steps[self._position]
        self._position += 1
        produced = step(messages) if callable(step) else step
        if isinstance(produced, str):
            return ChatReply(content=produced)
        calls = []
        for call in produced:
            self._call_ids += 1
            calls.append(ToolCall(f"call_{self._call_ids}", call.name, dict(call.arguments)))
        return ChatReply(tool_calls=tuple(calls))
