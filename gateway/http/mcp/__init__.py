"""The MCP endpoint: streamable HTTP at `/mcp`, JSON-RPC 2.0, through the pipeline.

The edge of MCP: each revision's wire turned into calls on MCP's shared state
(`gateway.mcp_state`: the catalog, subscriptions, streams, client requests, input rounds,
log levels) and back. `mcp_router` is the `/mcp` route the app includes.
"""

from fastapi import APIRouter as _APIRouter

from gateway.http.mcp.call_stream import CallStream
from gateway.http.mcp.endpoint import router as _router
from gateway.http.mcp.messages import (
    McpAnswer,
    McpMessage,
    parse_message,
    rpc_error,
    tool_failure,
    tool_result,
)
from gateway.http.mcp.task_methods import outcome_of as task_outcome_of

__all__ = [
    "CallStream",
    "McpAnswer",
    "McpMessage",
    "mcp_router",
    "parse_message",
    "rpc_error",
    "task_outcome_of",
    "tool_failure",
    "tool_result",
]


def mcp_router() -> _APIRouter:
    """The `/mcp` route, for the app to include."""
    return _router
