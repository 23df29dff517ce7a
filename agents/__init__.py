"""The agent SDK: agents, the gateway client, model providers and team topologies."""

from agents.agent import Agent, AgentBudget
from agents.client import GatewayClient, budget_headers, retry_transient
from agents.errors import AgentError, BudgetSpent, GatewayCallError, RecoveryFailed, StateConflict
from agents.loop import AgentRun, CallRecord, LoopBudget, run_loop, tool_definitions
from agents.models import (
    ChatModel,
    ChatReply,
    LocalModel,
    OpenAICompatible,
    ScriptedCall,
    ScriptedModel,
    ToolCall,
)
from agents.recovery import RecoveryHooks, RecoveryPolicy, RecoveryStep

__all__ = [
    "Agent",
    "AgentBudget",
    "AgentError",
    "AgentRun",
    "BudgetSpent",
    "CallRecord",
    "ChatModel",
    "ChatReply",
    "GatewayCallError",
    "GatewayClient",
    "LocalModel",
    "LoopBudget",
    "OpenAICompatible",
    "RecoveryFailed",
    "RecoveryHooks",
    "RecoveryPolicy",
    "RecoveryStep",
    "ScriptedCall",
    "ScriptedModel",
    "StateConflict",
    "ToolCall",
    "budget_headers",
    "retry_transient",
    "run_loop",
    "tool_definitions",
]
