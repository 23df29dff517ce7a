"""The gateway's HTTP edge: the app, the hot path, routes, MCP, bodies and SERF responses."""

from gateway.http.bounded_protocol import BoundedHttpToolsProtocol
from gateway.http.connection_audit import ConnectionAudit
from gateway.http.connection_limits import ConnectionLimits
from gateway.http.gateway_parts import GatewayParts, gateway_parts, keep_parts
from gateway.http.http_app import GatewayApp, build_http_app
from gateway.http.responses import install_error_handlers, refusal, serf_response
from gateway.http.uvicorn_protocol import CoalescingHttpToolsProtocol, CoalescingTransport

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
