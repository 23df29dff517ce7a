"""The gateway's HTTP connections, before a request reaches the app: uvicorn's protocol with
every connection bounded (head size, header count, time, connections per client) and each
answer written in one piece, the Host check, the pacing of strangers' refusals, and the audit
of what this layer refused."""

from gateway.http.connections.bounded_protocol import BoundedHttpToolsProtocol
from gateway.http.connections.connection_audit import ConnectionAudit
from gateway.http.connections.connection_limits import ConnectionLimits
from gateway.http.connections.host_check import HostCheck
from gateway.http.connections.stranger_pacing import StrangerPacing
from gateway.http.connections.uvicorn_protocol import (
    CoalescingHttpToolsProtocol,
    CoalescingTransport,
)

__all__ = [
    "BoundedHttpToolsProtocol",
    "CoalescingHttpToolsProtocol",
    "CoalescingTransport",
    "ConnectionAudit",
    "ConnectionLimits",
    "HostCheck",
    "StrangerPacing",
]
