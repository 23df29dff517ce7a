"""The gateway's HTTP edge: the app, the hot path, routes, MCP, bodies and SERF responses."""

from gateway.http.connections import (
    BoundedHttpToolsProtocol,
    CoalescingHttpToolsProtocol,
    CoalescingTransport,
    ConnectionAudit,
    ConnectionLimits,
)
from gateway.http.gateway_parts import GatewayParts, gateway_parts, keep_parts
from gateway.http.http_app import GatewayApp, build_http_app
from gateway.http.responses import install_error_handlers, refusal, serf_response

__all__ = [
    "BoundedHttpToolsProtocol",
    "CoalescingHttpToolsProtocol",
    "CoalescingTransport",
    "ConnectionAudit",
    "ConnectionLimits",
    "GatewayApp",
    "GatewayParts",
    "build_http_app",
    "gateway_parts",
    "install_error_handlers",
    "keep_parts",
    "refusal",
    "serf_response",
]
