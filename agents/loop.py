"""The agent loop: the model proposes tool calls, the gateway runs them, results go back.

It stops when the model answers without calling a tool, when the agent's budget ends (turns
or deadline), or when the gateway says `abort`/`reauth`: those cannot be fixed by another
turn. Any other SERF refusal goes back to the model as the tool's result, envelope and all,
so a capable model can follow `action` and `param_hints` itself.

A local tool that needs the gateway (the team's shared-state tools) reaches it through
`current_client()`: the client of the run calling it, with that run's identity and session.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal

from agents.agent_errors import GatewayCallError
from agents.client import GatewayClient
from agents.models import ChatModel, Message, ToolDefinition
from protocol import Budget, RecoveryAction, SerfError, ToolSpec

StopReason = Literal["answered", "turns", "deadline", "aborted"]
_FATAL = (RecoveryAction.ABORT, RecoveryAction.REAUTH)
_RUN_CLIENT: ContextVar[GatewayClient] = ContextVar("run_client")


def current_client() -> GatewayClient:
    """The gateway client of the run whose local tool is being called (its session's)."""
    try:
        return _RUN_CLIENT.get()
    except LookupError:
        raise RuntimeError("current_client() is only known inside an agent's run") from None


@dataclass(frozen=True)
class LoopBudget:
    """What one run may spend: model turns, and an absolute deadline (unix ms) if any."""

    max_turns: int = 8
    deadline_ms: int | None = None
    reserve_ms: int = 0  # kept back for the model's own turns when the gateway splits time


@dataclass(frozen=True)
class LocalTool:
    """A tool the agent runs itself (e.g. shared-state access through its own client)."""

    definition: ToolDefinition  # OpenAI tool shape
    handler: Callable[[dict[str, Any]], Awaitable[Any]]

    @property
    def name(self) -> str:
        return str(self.definition["function"]["name"])


@dataclass(frozen=True)
class CallRecord:
    tool: str
    arguments: dict[str, Any]
    result: Any = None
    error: SerfError | None = None
    client_ms: float = 0.0  # round trip seen by the agent
    tool_ms: float = 0.0  # the tool's own wall time inside the sandbox


@dataclass
class AgentRun:
    answer: str | None
    stopped: StopReason
    turns: int
    calls: list[CallRecord] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    session: str | None = None  # the X-Conclave-Session the run worked in


def tool_definitions(specs: list[ToolSpec]) -> list[ToolDefinition]:
    """Gateway tool specs in the OpenAI tool-calling shape."""
    return [
        {
            "type": "function",
            "function": {
                "name": spec.name,
                "description": spec.description,
                "parameters": spec.input_schema,
            },
        }
        for spec in specs
    ]


def _now_ms() -> int:
    return int(time.time() * 1000)


async def run_tool_call(
    client: GatewayClient,
    name: str,
    arguments: dict[str, Any],
    budget: LoopBudget,
    local: LocalTool | None = None,
) -> CallRecord:
    started = time.perf_counter()
    if local is not None:
        try:
            value = await local.handler(arguments)
        except GatewayCallError as exc:
            return CallRecord(name, arguments, error=exc.serf)
        return CallRecord(name, arguments, value, None, (time.perf_counter() - started) * 1000)
    grant = Budget(deadline_ms=budget.deadline_ms, plan=(name,), reserve_ms=budget.reserve_ms)
    try:
        result = await client.call_tool(name, arguments, budget=grant)
    except GatewayCallError as exc:
        elapsed = (time.perf_counter() - started) * 1000
        return CallRecord(name, arguments, error=exc.serf, client_ms=elapsed)
    elapsed = (time.perf_counter() - started) * 1000
    return CallRecord(name, arguments, result.result, None, elapsed, result.usage.wall_ms)


async def run_loop(
    model: ChatModel,
    client: GatewayClient,
    messages: list[Message],
    tools: list[ToolSpec],
    budget: LoopBudget,
    local_tools: list[LocalTool] | None = None,
) -> AgentRun:
    reset = _RUN_CLIENT.set(client)
    try:
        return await _loop(model, client, messages, tools, budget, local_tools or [])
    finally:
        _RUN_CLIENT.reset(reset)


async def _loop(
    model: ChatModel,
    client: GatewayClient,
    messages: list[Message],
    tools: list[ToolSpec],
    budget: LoopBudget,
    local_tools: list[LocalTool],
) -> AgentRun:
    local = {t.name: t for t in local_tools}
    definitions = tool_definitions(tools) + [t.definition for t in local.values()]
    run = AgentRun(answer=None, stopped="turns", turns=0, messages=messages)
    while run.turns < budget.max_turns:
        if budget.deadline_ms is not None and _now_ms() >= budget.deadline_ms:
            run.stopped = "deadline"
            return run
        run.turns += 1
        reply = await model.complete(messages, definitions)
        messages.append(reply.as_message())
        if not reply.tool_calls:
            run.answer, run.stopped = reply.content or "", "answered"
            return run
        for call in reply.tool_calls:
            record = await run_tool_call(
                client, call.name, call.arguments, budget, local.get(call.name)
            )
            run.calls.append(record)
            if record.error is not None:
                content = json.dumps({"error": record.error.model_dump(mode="json")})
            else:
                content = json.dumps(record.result, default=str)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
            if record.error is not None and record.error.action in _FATAL:
                run.stopped = "aborted"
                return run
    return run
