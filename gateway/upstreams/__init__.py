"""Remote MCP upstreams (`mcp_http` tool sources) served behind the gateway."""

from gateway.upstreams.http1_pool import Http1Answer, UpstreamClosed, read_answer
from gateway.upstreams.http_upstream import (
    DEADLINE_META,
    TIMEOUT_META,
    HttpUpstream,
    UpstreamCheck,
    check_upstream,
)
from gateway.upstreams.upstream_set import UpstreamRouter, UpstreamSet

__all__ = [
    "DEADLINE_META",
    "TIMEOUT_META",
    "Http1Answer",
    "HttpUpstream",
    "UpstreamCheck",
    "UpstreamClosed",
    "UpstreamRouter",
    "UpstreamSet",
    "check_upstream",
    "read_answer",
]
