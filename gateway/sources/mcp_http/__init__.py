"""`mcp_http` sources: remote MCP servers the gateway speaks to itself, no sandbox involved.

Prepare: nothing to build; `check_upstream` (`conclave tools check`) tries one. Discover:
`UpstreamSet` opens each upstream (`http_upstream`, over its `mcp_session`) and registers the
tools its `tools/list` declares, at start-up and again when it says its list changed
(`upstream_events`, which also relays resource updates). Execute: `HttpUpstream.call`, where
`gateway.sources.SourceRouter` sends a call of such a tool (`tools.calls.Placement`);
`upstream_rounds` carries the 2026-07-28 wire's input rounds and `upstream_failure` turns
what goes wrong into SERF errors.
"""

from gateway.sources.mcp_http.http_upstream import (
    DEADLINE_META,
    TIMEOUT_META,
    HttpUpstream,
    UpstreamCheck,
    check_upstream,
)
from gateway.sources.mcp_http.upstream_events import SourceEvents, UpstreamListener
from gateway.sources.mcp_http.upstream_set import UpstreamSet

__all__ = [
    "DEADLINE_META",
    "TIMEOUT_META",
    "HttpUpstream",
    "SourceEvents",
    "UpstreamCheck",
    "UpstreamListener",
    "UpstreamSet",
    "check_upstream",
]
