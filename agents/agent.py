"""`Agent`: a few lines of Python that become an identity on the gateway and a loop.

An agent names its model, its instructions, the tools it may call (glob patterns) and the
state namespaces it works in. `register` asks the gateway (as admin) for the agent's own
token with exactly those rights, and returns the agent's own pooled `GatewayClient`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

from agents.client import GatewayClient
from agents.loop import AgentRun, LocalTool, LoopBudget, run_loop
from agents.models import ChatModel, Message
from protocol import AgentRegistration

Access = Literal["read", "write"]


@dataclass(frozen=True)
class AgentBudget:
    """Per run: at most `max_turns` model turns and, optionally, `deadline_s` of wall time."""

    max_turns: int = 8
    deadline_s: float | None = None
    reserve_ms: int = 0

    def start(self) -> LoopBudget:
        deadline = None
        if self.deadline_s is not None:
            deadline = int((time.time() + self.deadline_s) * 1000)
        return LoopBudget(self.max_turns, deadline, self.reserve_ms)


@dataclass
class Agent:
    name: str
    instructions: str
    model: ChatModel
    tools: list[str] = field(default_factory=list)
    namespaces: dict[str, Access] = field(default_factory=dict)
    budget: AgentBudget = field(default_factory=AgentBudget)
    tenant: str = "default"
    local_tools: list[LocalTool] = field(default_factory=list)
    client: GatewayClient | None = None

    def registration(self) -> AgentRegistration:
        return AgentRegistration(
            tenant=self.tenant, agent=self.name, tools=self.tools, namespaces=self.namespaces
        )

    async def register(self, admin: GatewayClient, *, session: str | None = None) -> GatewayClient:
        """Get this agent's own token from the gateway; keep and return its client."""
        token = await admin.register_agent(self.registration())
        self.client = admin.for_token(token.token, session=session)
        return self.client

    def _client(self) -> GatewayClient:
        if self.client is None:
            raise RuntimeError(
                f"agent {self.name!r} is not registered: await agent.register(admin)"
            )
        return self.client

    async def run(self, task: str, *, history: list[Message] | None = None) -> AgentRun:
        """Work on `task` until the model answers or the budget ends."""
        client = self._client()
        tools = await client.list_tools() if self.tools else []
        messages: list[Message] = [{"role": "system", "content": self.instructions}]
        messages += history or []
        messages.append({"role": "user", "content": task})
        return await run_loop(
            self.model, client, messages, tools, self.budget.start(), self.local_tools
        )

    async def aclose(self) -> None:
        if self.client is not None:
            await self.client.aclose()
