"""A pydantic-ai agent served over A2A by fasta2a (`agent_to_a2a`), as pydantic-ai's users
serve theirs: `python -m tests.pydantic_ai_a2a_server --port N`. Its model is a function, so
the answer is known: "pydantic-ai heard: <the message's text>"."""

from __future__ import annotations

import argparse

import uvicorn
from fasta2a.pydantic_ai import agent_to_a2a
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel


def _reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    prompts = [
        part.content
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart) and isinstance(part.content, str)
    ]
    return ModelResponse(parts=[TextPart(f"pydantic-ai heard: {prompts[-1] if prompts else ''}")])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    port = parser.parse_args().port
    agent = Agent(FunctionModel(_reply), name="listener")
    app = agent_to_a2a(agent, url=f"http://127.0.0.1:{port}")
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
