"""A LangGraph agent on Conclave's tools through langchain-mcp-adapters, as its users wire it:
a StateGraph of a chat model and langgraph's ToolNode (its default error handling), the tools
loaded from one MCP session (`MultiServerMCPClient.session` + `load_mcp_tools`).

The chat model is scripted (no network): it calls `echo`, then `read_file` on a file that does
not exist (the tool raises), then `echo` again after the agent's token was revoked (the
script revokes it as the third turn is produced), then answers. Run in the `langchain` client
venv by tests/e2e/test_mcp_client_matrix.py with CONCLAVE_URL and CONCLAVE_ADMIN_KEY set;
prints one JSON object: the tools loaded, each message of the run, and whether the run
ended or raised.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import httpx
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

URL, ADMIN_KEY = os.environ["CONCLAVE_URL"], os.environ["CONCLAVE_ADMIN_KEY"]
ADMIN = {"X-Conclave-Admin-Key": ADMIN_KEY}
TENANT, AGENT = "acme", "langgraph-desk"


def revoke() -> None:
    answer = httpx.delete(f"{URL}/v1/agents/{TENANT}/{AGENT}", headers=ADMIN, timeout=30)
    answer.raise_for_status()


class ScriptedChatModel(BaseChatModel):
    """Plays one turn per call: a list of (tool, arguments) calls, or a final answer."""

    turns: list[Any]

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        turn = sum(isinstance(m, AIMessage) for m in messages)
        if turn == 2:
            revoke()  # mid-run: the session and the loaded tools stay, the token does not
        step = self.turns[turn]
        if isinstance(step, str):
            message = AIMessage(content=step)
        else:
            calls = [
                {"name": name, "args": args, "id": f"call-{turn}-{i}"}
                for i, (name, args) in enumerate(step)
            ]
            message = AIMessage(content="", tool_calls=calls)
        return ChatResult(generations=[ChatGeneration(message=message)])


def text_of(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "\n".join(str(block.get("text", block)) for block in content)  # type: ignore[union-attr]


def _leaves(exc: BaseException) -> list[str]:
    """The exceptions at the bottom of a group, as `Type: message`."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [f"{type(exc).__name__}: {exc}"]


async def main() -> None:
    body = {"tenant": TENANT, "agent": AGENT, "tools": ["echo", "read_file"]}
    async with httpx.AsyncClient(timeout=30) as http:
        registered = await http.post(f"{URL}/v1/agents", json=body, headers=ADMIN)
    registered.raise_for_status()
    token = registered.json()["token"]
    connection = {
        "transport": "streamable_http",
        "url": f"{URL}/mcp",
        "headers": {"Authorization": f"Bearer {token}"},
    }
    client = MultiServerMCPClient({"conclave": connection})  # type: ignore[dict-item]
    model = ScriptedChatModel(
        turns=[
            [("echo", {"message": "first"})],
            [("read_file", {"path": "no-such-file.txt"})],
            [("echo", {"message": "after revocation"})],
            "done",
        ]
    )
    report: dict[str, Any] = {"messages": []}
    try:
        async with client.session("conclave") as session:
            tools = await load_mcp_tools(session)
            report["tools"] = sorted(tool.name for tool in tools)
            graph = StateGraph(MessagesState)
            graph.add_node("model", lambda state: {"messages": [model.invoke(state["messages"])]})
            graph.add_node("tools", ToolNode(tools))
            graph.add_edge(START, "model")
            graph.add_conditional_edges("model", tools_condition)
            graph.add_edge("tools", "model")
            final = await graph.compile().ainvoke({"messages": [("user", "go")]})
        for message in final["messages"]:
            status = message.status if isinstance(message, ToolMessage) else None
            report["messages"].append(
                {"type": type(message).__name__, "status": status, "text": text_of(message)}
            )
        report["outcome"] = "ended"
    except BaseException as exc:  # what the user's program would die of
        report["outcome"] = "raised " + "; ".join(_leaves(exc))
    print(json.dumps(report))


asyncio.run(main())
