"""`OpenAICompatible`: any chat-completions endpoint with tools (OpenAI, vLLM, Ollama, llama.cpp).

Speaks the wire format directly over httpx (no vendor SDK), so the same class works with any
server that implements `POST {base_url}/chat/completions`. Transport failures and unreadable
answers become `ModelError` here, in one place.
"""

from __future__ import annotations

from typing import Any

import httpx

from agents.models.base import (
    ChatReply,
    Message,
    ModelError,
    ToolCall,
    ToolDefinition,
    decode_arguments,
)


class OpenAICompatible:
    """A chat model behind an OpenAI-compatible HTTP endpoint."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        temperature: float | None = 0.0,
        timeout_s: float = 120.0,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.temperature = temperature
        self.extra_body = dict(extra_body or {})
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.AsyncClient(base_url=self.base_url, headers=headers, timeout=timeout_s)

    @property
    def name(self) -> str:
        return f"{self.model}@{self.base_url}"

    async def complete(
        self, messages: list[Message], tools: list[ToolDefinition] | None = None
    ) -> ChatReply:
        body: dict[str, Any] = {"model": self.model, "messages": messages, **self.extra_body}
        if tools:
            body["tools"] = tools
        if self.temperature is not None:
            body["temperature"] = self.temperature
        try:
            response = await self._http.post("/chat/completions", json=body)
        except httpx.HTTPError as exc:
            raise ModelError(
                f"model endpoint {self.base_url} not reachable ({type(exc).__name__}): check"
                " the base URL and that the server is running"
            ) from exc
        if response.status_code != 200:
            raise ModelError(
                f"model endpoint {self.base_url} answered {response.status_code}:"
                f" {response.text[:300]}"
            )
        try:
            return parse_completion(response.json())
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise ModelError(f"unreadable chat completion from {self.base_url}: {exc}") from exc

    async def aclose(self) -> None:
        await self._http.aclose()


def parse_completion(payload: dict[str, Any]) -> ChatReply:
    """Read the first choice of a chat-completions answer."""
    message = payload["choices"][0]["message"]
    calls = tuple(
        ToolCall(
            id=str(raw.get("id") or f"call_{index}"),
            name=str(raw["function"]["name"]),
            arguments=decode_arguments(raw["function"].get("arguments")),
        )
        for index, raw in enumerate(message.get("tool_calls") or [])
    )
    usage = payload.get("usage") or {}
    return ChatReply(
        content=message.get("content"),
        tool_calls=calls,
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
    )
