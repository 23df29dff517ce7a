"""The gateway's HTTP routes, one module per resource, and the order the app matches them in."""

from gateway.http.mcp import mcp_router as _mcp_router
from gateway.http.routes import (
    a2a_routes,
    a2a_worker_routes,
    agent_routes,
    api_docs_routes,
    approval_routes,
    audit_routes,
    catalog_routes,
    front_routes,
    health_routes,
    latency_routes,
    metrics_routes,
    oauth_routes,
    policy_routes,
    quota_routes,
    state_routes,
    tenant_state_routes,
    tool_routes,
)

# Routes are matched in this order, by the router and by the fast path alike: the hot ones
# (tool calls, /mcp) first.
ROUTERS = (
    tool_routes.router,
    _mcp_router(),
    latency_routes.router,
    health_routes.router,
    state_routes.router,
    a2a_routes.router,
    a2a_worker_routes.router,
    agent_routes.router,
    catalog_routes.router,
    audit_routes.router,
    policy_routes.router,
    approval_routes.router,
    quota_routes.router,
    tenant_state_routes.router,
    metrics_routes.router,
    oauth_routes.router,
    front_routes.router,
    api_docs_routes.router,
)

__all__ = ["ROUTERS"]
