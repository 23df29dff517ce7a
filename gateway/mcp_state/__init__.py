"""MCP's shared state, behind the `/mcp` edge (`gateway.http.mcp`) and kept in Redis so any
replica serves it: the catalog of the MCP sources' resources, templates, prompts and
completions; resource subscriptions; the streams held open to callers; the requests servers
send a calling client and its answers; 2026-07-28's input rounds; each caller's log level.

It knows nothing of HTTP routes: the edge turns a revision's wire into calls on it, and the
gateway's parts (`gateway.http.gateway_parts`) hold one of each.
"""

from gateway.mcp_state.caller_streams import Accepts, CallerStreams
from gateway.mcp_state.catalog import (
    ASKING_OPERATIONS,
    CAPABILITIES,
    UPSTREAM_OPERATIONS,
    Action,
    McpCatalog,
)
from gateway.mcp_state.client_requests import ClientRequests
from gateway.mcp_state.input_rounds import STATE_FIELD, InputRounds, RoundCall
from gateway.mcp_state.log_levels import SET_LEVEL_METHOD, LogLevels
from gateway.mcp_state.mcp_sources import McpSource, sources_for
from gateway.mcp_state.subscriptions import MAX_SUBSCRIPTIONS, ResourceSubscriptions

__all__ = [
    "ASKING_OPERATIONS",
    "CAPABILITIES",
    "MAX_SUBSCRIPTIONS",
    "SET_LEVEL_METHOD",
    "STATE_FIELD",
    "UPSTREAM_OPERATIONS",
    "Accepts",
    "Action",
    "CallerStreams",
    "ClientRequests",
    "InputRounds",
    "LogLevels",
    "McpCatalog",
    "McpSource",
    "ResourceSubscriptions",
    "RoundCall",
    "sources_for",
]
