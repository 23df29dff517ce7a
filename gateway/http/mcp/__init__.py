"""The MCP endpoint: streamable HTTP at `/mcp`, JSON-RPC 2.0, through the pipeline.

The endpoint's route is loaded when the app includes it (`mcp_router`), not with the package:
the endpoint reads its parts from `gateway.http.gateway_parts`, whose `GatewayParts` names this
package's streams, catalog and log levels, so this package must load without the endpoint.
"""

from fastapi import APIRouter as _APIRouter

from gateway.http.mcp.call_stream import CallStream
from gateway.http.mcp.caller_streams import CallerStreams
from gateway.http.mcp.catalog import McpCatalog
from gateway.http.mcp.client_requests import ClientRequests
from gateway.http.mcp.input_rounds import InputRounds
from gateway.http.mcp.log_levels import LogLevels
from gateway.http.mcp.messages import (
    McpAnswer,
    McpMessage,
    parse_message,
    rpc_error,
    tool_failure,
    tool_result,
)
from gateway.http.mcp.subscriptions import ResourceSubscriptions
from gateway.http.mcp.task_methods import outcome_of as task_outcome_of

__all__ = [
    "CallStream",
    "CallerStreams",
    "ClientRequests",
    "InputRounds",
    "LogLevels",
    "McpAnswer",
    "McpCatalog",
    "McpMessage",
    "ResourceSubscriptions",
    "mcp_router",
    "parse_message",
    "rpc_error",
    "task_outcome_of",
    "tool_failure",
    "tool_result",
]


def mcp_router() -> _APIRouter:
    """The `/mcp` route, for the app to include."""
    from gateway.http.mcp.endpoint import router

    return router
