"""The OpenAI Agents SDK on Conclave's tools through `MCPServerStreamableHttp`, with a scripted
`Model` (no network, tracing off): the model records the tools the SDK offers it (the names
it would send to a model API as function names), calls the built-in `echo` and the federated
`notes__echo`, then answers. Run in the `openai_agents` client venv by
tests/e2e/test_mcp_client_matrix.py with CONCLAVE_URL and CONCLAVE_ADMIN_KEY set; prints one
JSON object: the tool names offered, each tool output the model saw, the final output.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import httpx
from agents.items import ModelResponse
from agents.mcp import MCPServerStreamableHttp
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from agents import Agent, Runner, set_tracing_disabled

URL, ADMIN_KEY = os.environ["CONCLAVE_URL"], os.environ["CONCLAVE_ADMIN_KEY"]
CALLS = [("echo", {"message": "from the agents sdk"}), ("notes__echo", {"message": "federated"})]


class ScriptedModel(Model):
    """One tool call a turn from CALLS, then a final answer; records what it was offered."""

    def __init__(self) -> None:
        self.offered: list[str] = []
        self.outputs: list[str] = []

    async def get_response(
        self,
        system_instructions: Any,
        input: Any,
        model_settings: Any,
        tools: Any,
        *a: Any,
        **kw: Any,
    ) -> ModelResponse:
        self.offered = sorted(tool.name for tool in tools)
        results = [
            i for i in input if isinstance(i, dict) and i.get("type") == "function_call_output"
        ]
        self.outputs = [_text(result["output"]) for result in results]
        if len(results) < len(CALLS):
            name, arguments = CALLS[len(results)]
            item: Any = ResponseFunctionToolCall(
                type="function_call",
                call_id=f"call-{len(results)}",
                name=name,
                arguments=json.dumps(arguments),
            )
        else:
            answer = ResponseOutputText(type="output_text", text="done", annotations=[])
            item = ResponseOutputMessage(
                type="message", id="msg-1", role="assistant", status="completed", content=[answer]
            )
        return ModelResponse(output=[item], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the scripted model does not stream")


def _text(output: Any) -> str:
    if isinstance(output, str):
        return output
    return "\n".join(str(part.get("text", part)) for part in output)


async def main() -> None:
    body = {"tenant": "acme", "agent": "agents-sdk", "tools": ["echo", "read_file", "notes.*"]}
    headers = {"X-Conclave-Admin-Key": ADMIN_KEY}
    async with httpx.AsyncClient(timeout=30) as http:
        registered = await http.post(f"{URL}/v1/agents", json=body, headers=headers)
    registered.raise_for_status()
    auth = {"Authorization": f"Bearer {registered.json()['token']}"}
    set_tracing_disabled(True)
    model = ScriptedModel()
    params: Any = {"url": f"{URL}/mcp", "headers": auth}
    async with MCPServerStreamableHttp(params=params, name="conclave") as conclave:
        agent = Agent(name="desk", model=model, mcp_servers=[conclave])
        result = await Runner.run(agent, "Echo twice")
    report = {"offered": model.offered, "outputs": model.outputs, "final": result.final_output}
    print(json.dumps(report))


asyncio.run(main())
