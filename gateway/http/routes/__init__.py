"""The gateway's HTTP routes, one module per resource; `gateway.http.app` includes them."""

from gateway.http.routes import (
    agent_routes,
    audit_routes,
    health_routes,
    latency_routes,
    metrics_routes,
    state_routes,
    tool_routes,
)

__all__ = [
    "agent_routes",
    "audit_routes",
    "health_routes",
    "latency_routes",
    "metrics_routes",
    "state_routes",
    "tool_routes",
]
