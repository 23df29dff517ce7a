"""A pydantic-ai agent served by fasta2a (pydantic-ai's A2A server) behind the gateway as an
`[[a2a_agent]]`: the gateway reads its card, the caller reaches it through `/a2a/listener`
with its own token, and the answer is the agent's."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agents import Agent, GatewayClient, ScriptedModel
from conclave.bench.core import running_child_server
from conclave.stack import EmbeddedStack
from conclave.stack.ports import free_port
from tests.e2e.conftest import e2e_settings

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def listener_stack(
    redis_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[EmbeddedStack]:
    port = free_port()
    with running_child_server(["tests.pydantic_ai_a2a_server", "--port", str(port)], port):
        config = Path(tmp_path_factory.mktemp("fasta2a")) / "conclave.toml"
        config.write_text(f'[[a2a_agent]]\nname = "listener"\nurl = "http://127.0.0.1:{port}"\n')
        with EmbeddedStack(e2e_settings(redis_url, "process", config=config)) as stack:
            yield stack


async def test_a_pydantic_ai_agent_answers_through_the_gateway(
    listener_stack: EmbeddedStack,
) -> None:
    async with httpx.AsyncClient(base_url=listener_stack.url) as http:
        card = (await http.get("/a2a/listener/.well-known/agent-card.json")).json()
    assert card["name"] == "listener"
    assert card["supportedInterfaces"] == [
        {"url": f"{listener_stack.url}/a2a/listener", "protocolBinding": "JSONRPC",
         "protocolVersion": "1.0"},
    ]  # fmt: skip
    async with GatewayClient(listener_stack.url, admin_key="e2e-admin-key") as admin:
        caller = Agent(
            f"c{uuid.uuid4().hex[:8]}",
            "asks",
            ScriptedModel([]),
            tenant="t-py",
            agents=["listener"],
        )
        await caller.register(admin)
        reply = await caller.delegate("listener", "is anyone there?")
        await caller.aclose()
    assert reply.task_id is not None
    assert "pydantic-ai heard: is anyone there?" in reply.text, reply
