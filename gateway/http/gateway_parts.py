"""The gateway's parts as one typed, frozen value: `GatewayParts`, and `gateway_parts(app)`.

`gateway.assembly` builds every part once, in the app's lifespan, and stores this one value on
the app; routes, the MCP endpoint, the console and the server process read their parts
through `gateway_parts(request.app)`, typed, instead of attributes set on `app.state` and read
by name. The configuration is not a part: it is known before the lifespan runs (the Host check
and the identity dependencies read it from the first request on), so `gateway.config`'s
`app_settings(app)` reads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from redis.asyncio import Redis
from starlette.applications import Starlette

from gateway.a2a import A2aForwarder, CardSigner, HostedA2a, HostedAgents, RemoteAgents
from gateway.approvals import ApprovalBook
from gateway.budgets import CircuitBreaker, LatencyWindow
from gateway.cancellation import InflightCalls
from gateway.egress import EgressProxy
from gateway.http.connections import ConnectionAudit
from gateway.identity import AgentDirectory
from gateway.mcp_state import CallerStreams, ClientRequests, InputRounds, LogLevels, McpCatalog
from gateway.mcp_tasks import TaskRunner
from gateway.pipeline import HeaderCheck, Pipeline
from gateway.policy import PolicyStore
from gateway.quotas import QuotaBook
from gateway.sources import StdioSources, UpstreamSet
from gateway.state import StateStore
from gateway.telemetry import AuditWriter, GatewayMetrics
from tools import ToolRegistry
from tools.calls import ToolExecutor


@dataclass(frozen=True, slots=True)
class GatewayParts:
    """Everything a running gateway serves requests with, each built once by the assembly."""

    sandbox_name: str  # the executor's backend, as configured ("docker", "inprocess", ...)
    registry: ToolRegistry  # the tools served: the configured modules' and the sources'
    metrics: GatewayMetrics
    connection_audit: ConnectionAudit  # the server's protocol writes its refusals through it
    redis: Redis
    audit: AuditWriter
    inflight: InflightCalls  # notifications/cancelled finds calls here, from any replica
    log_levels: LogLevels  # each caller's logging/setLevel
    egress: EgressProxy
    stdio: StdioSources  # mcp_stdio sources
    executor: ToolExecutor  # runs the tools (the sandbox pool, or in-process)
    agents: AgentDirectory
    state_store: StateStore
    latency_window: LatencyWindow
    breaker: CircuitBreaker
    upstreams: UpstreamSet  # mcp_http sources
    caller_streams: CallerStreams  # /mcp's GET streams, fed from any replica
    mcp_catalog: McpCatalog
    pipeline: Pipeline
    header_check: HeaderCheck  # what authenticate and budget decide before a body is read
    client_requests: ClientRequests  # clients' answers to their calls' servers, any replica
    input_rounds: InputRounds  # a 2026-07-28 client's calls waiting on its answers
    tasks: TaskRunner  # MCP tasks: their calls, run in this replica's group
    policy_store: PolicyStore  # the admin API's policy rules, followed on every replica
    approvals: ApprovalBook  # calls held for approval, decided on any replica
    quotas: QuotaBook  # conclave.toml's quotas, counted exactly in Redis
    a2a_agents: RemoteAgents  # the A2A agents served at /a2a/{name}
    a2a: A2aForwarder  # forwards their requests, the caller's tasks bound to it
    hosted_agents: HostedAgents  # the A2A agents served at /a2a/{name} by pulling workers
    hosted: HostedA2a  # their tasks, in Redis, answered to callers and handed to workers
    card_signer: CardSigner | None  # signs the agent cards served (CONCLAVE_A2A_CARD_KEY)


_KEY = "gateway_parts"  # the one attribute of `app.state` the parts live in


def gateway_parts(app: Starlette) -> GatewayParts:
    """The parts of the running gateway `app` (in a handler: `gateway_parts(request.app)`)."""
    parts = getattr(app.state, _KEY, None)
    if parts is None:  # a wiring bug: read before the lifespan built them
        raise RuntimeError("the gateway's parts are built by its lifespan: start the app first")
    return cast(GatewayParts, parts)


def keep_parts(app: Starlette, parts: GatewayParts) -> None:
    """Store `parts` on `app` (the assembly does, once)."""
    setattr(app.state, _KEY, parts)


__all__ = ["GatewayParts", "gateway_parts", "keep_parts"]
