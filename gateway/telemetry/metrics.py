"""Prometheus metrics, in a registry of the app's own (so two apps in one process never
collide): requests, latency per tool and per stage, errors by SERF code, rate-limit hits.

Labels are bounded: every series is named by something the gateway serves, never by what a
caller sent. The transport, outcome, stage and SERF code are the gateway's own closed sets;
an operation is one of `GATEWAY_OPERATIONS` or a registered tool's name, and anything else
(an unknown tool, a method the caller made up) is counted under `OTHER`. So /metrics stays
the same size however many distinct names callers send.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

from protocol import A2A_METHODS
from tools import ToolRegistry, default_registry

# Sub-millisecond buckets first: the gateway's own stages live there.
_BUCKETS = (0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)

OTHER = "other"
# The operations the gateway's routes name (`RequestContext.operation`) besides tool names.
GATEWAY_OPERATIONS = frozenset(
    {
        "(unresolved tool)",
        "tools:list",
        "tools:latency",
        "state:create",
        "state:namespace",
        "state:history",
        "state:keys",
        "state:read",
        "state:lease",
        "state:release",
        "state:commit",
        "mcp:initialize",
        "mcp:ping",
        "mcp:tools/list",
        "mcp:tools/call",
        "mcp:notifications",
        "mcp:(unknown method)",
        "mcp:(unreadable)",
        "a2a:(unreadable)",
        "a2a:(unknown method)",
        *(f"a2a:{method}" for method in A2A_METHODS),
    }
)


class GatewayMetrics:
    def __init__(self, tools: ToolRegistry = default_registry) -> None:
        self._tools = tools
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "conclave_requests",
            "Requests through the pipeline",
            ["transport", "operation", "outcome"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "conclave_request_seconds",
            "Request latency through the whole pipeline, per tool or operation",
            ["operation"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.stage_latency = Histogram(
            "conclave_stage_seconds",
            "Time spent in each pipeline stage",
            ["stage"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.errors = Counter(
            "conclave_errors",
            "Refusals and failures by SERF code",
            ["code"],
            registry=self.registry,
        )
        self.rate_limited = Counter(
            "conclave_rate_limited",
            "Requests refused by the rate limit",
            ["operation"],
            registry=self.registry,
        )

    def operation_label(self, operation: str) -> str:
        """`operation` if the gateway serves it (its own operation or a registered tool),
        else `OTHER`: the only label a caller's text could reach."""
        if operation in GATEWAY_OPERATIONS or operation in self._tools:
            return operation
        return OTHER
