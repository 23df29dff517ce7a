"""The agent SDK: agents, the gateway client, model providers and team topologies."""

from agents.a2a_worker import Artifact, Reply, TaskLost, WorkItem, serve_a2a
from agents.agent import Agent, AgentBudget
from agents.agent_errors import AgentError, GatewayCallError, RecoveryFailed, StateConflict
from agents.client import GatewayClient, budget_headers, retry_transient
from agents.delegation import Delegated
from agents.local_tool import local_tool
from agents.loop import (
    AgentRun,
    CallRecord,
    LocalTool,
    LoopBudget,
    current_client,
    run_loop,
    tool_definitions,
)
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
from agents.shared_state import SharedState, TransactionResult
from agents.teams import Team, centralized, decentralized, independent, shared_tools, single

__all__ = [
    "Agent",
    "AgentBudget",
    "AgentError",
    "AgentRun",
    "Artifact",
    "CallRecord",
    "ChatModel",
    "ChatReply",
    "Delegated",
    "GatewayCallError",
    "GatewayClient",
    "LocalModel",
    "LocalTool",
    "LoopBudget",
    "OpenAICompatible",
    "RecoveryFailed",
    "RecoveryHooks",
    "RecoveryPolicy",
    "RecoveryStep",
    "Reply",
    "ScriptedCall",
    "ScriptedModel",
    "SharedState",
    "StateConflict",
    "TaskLost",
    "Team",
    "ToolCall",
    "TransactionResult",
    "WorkItem",
    "budget_headers",
    "centralized",
    "current_client",
    "decentralized",
    "independent",
    "local_tool",
    "retry_transient",
    "run_loop",
    "serve_a2a",
    "shared_tools",
    "single",
    "tool_definitions",
]
