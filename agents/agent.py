"""`Agent`: a few lines of Python that become an identity on the gateway and a loop.

An agent names its model, its instructions, the tools it may call (glob patterns) and the
state namespaces it works in. `register` asks the gateway (as admin) for the agent's own
token with exactly those rights, and returns the agent's own pooled `GatewayClient`.

Each `run` (one task) works in a fresh session (`X-Conclave-Session`): the gateway validates
a commit against the reads logged in its session, so a read from an earlier task can never
block this task's writes. `run(task, session="...")` keeps a named session instead, for
tasks that must build on what an earlier one read.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Literal

import anyio

from agents.a2a_worker import WorkItem, serve_a2a
from agents.client import GatewayClient
from agents.delegation import Delegated
from agents.loop import AgentRun, LocalTool, LoopBudget, run_loop
from agents.models import ChatModel, Message
from protocol import AgentRegistration, Budget

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
    agents: list[str] = field(default_factory=list)  # the A2A agents it may delegate to
    # Tool and state scopes it may hand on to the agents it delegates to, beyond its own
    # ("tool:<glob>", "state:<glob>:<access>"): what they do for it is limited to its own
    # grant and these.
    delegable: list[str] = field(default_factory=list)
    budget: AgentBudget = field(default_factory=AgentBudget)
    tenant: str = "default"
    local_tools: list[LocalTool] = field(default_factory=list)
    client: GatewayClient | None = None

    def registration(self) -> AgentRegistration:
        return AgentRegistration(
            tenant=self.tenant,
            agent=self.name,
            tools=self.tools,
            namespaces=self.namespaces,
            agents=self.agents,
            delegable=self.delegable,
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

    async def run(
        self, task: str, *, history: list[Message] | None = None, session: str | None = None
    ) -> AgentRun:
        """Work on `task` until the model answers or the budget ends, in a new session
        (or in `session`, when given)."""
        identity = self._client()
        run_session = session or uuid.uuid4().hex
        async with identity.for_token(identity.token or "", session=run_session) as client:
            tools = await client.list_tools() if self.tools else []
            messages: list[Message] = [{"role": "system", "content": self.instructions}]
            messages += history or []
            messages.append({"role": "user", "content": task})
            run = await run_loop(
                self.model, client, messages, tools, self.budget.start(), self.local_tools
            )
        run.session = run_session
        return run

    async def delegate(
        self, agent: str, text: str, *, task_id: str | None = None, budget: Budget | None = None
    ) -> Delegated:
        """Hand `text` to the A2A agent `agent` (one of `agents`) through the gateway, as this
        agent; `task_id` continues a task that asked for input (`GatewayClient.delegate`)."""
        return await self._client().delegate(agent, text, task_id=task_id, budget=budget)

    async def serve_a2a(
        self, name: str | None = None, *, concurrency: int = 1, stop: anyio.Event | None = None
    ) -> None:
        """Serve this agent as the hosted A2A agent `name` (by default its own name; the
        gateway declares it `[[a2a_agent]]` with this agent's tenant and no url): each task's
        latest message is `run`, and the run's answer is the reply (`agents.serve_a2a`)."""

        async def answer(item: WorkItem) -> str:
            run = await self.run(item.text)
            if run.answer is None:
                raise RuntimeError(f"the agent gave no answer (its run stopped: {run.stopped})")
            return run.answer

        await serve_a2a(
            self._client(), name or self.name, answer, concurrency=concurrency, stop=stop
        )

    async def aclose(self) -> None:
        if self.client is not None:
            await self.client.aclose()
