"""Tool sources (DESIGN.md, "Tool sources"): the user's `python` modules and `mcp_stdio`
servers, run in sandboxes, and remote `mcp_http` upstreams, all served as `<source>.<tool>`.

`python_sources` and `stdio_sources` prepare and discover their tools at start-up (the
gateway never imports user code); `http_upstream` and its session, connection pool and
failure mapping speak to a remote MCP server; `upstream_set` routes calls to it, and
`upstream_events` hears what it says unasked (resource updates, list changes).
"""

from gateway.sources.mcp_http import (
    DEADLINE_META,
    TIMEOUT_META,
    HttpUpstream,
    SourceEvents,
    UpstreamCheck,
    UpstreamListener,
    UpstreamRouter,
    UpstreamSet,
    check_upstream,
)
from gateway.sources.mcp_stdio import StdioRouter, StdioSources
from gateway.sources.python_sources import (
    PythonSources,
    open_python_sources,
    register_sources,
)
from gateway.sources.shared import (
    ClientChannel,
    Http1Answer,
    UpstreamClosed,
    effective_backend,
    read_answer,
)

__all__ = [
    "DEADLINE_META",
    "TIMEOUT_META",
    "ClientChannel",
    "Http1Answer",
    "HttpUpstream",
    "PythonSources",
    "SourceEvents",
    "StdioRouter",
    "StdioSources",
    "UpstreamCheck",
    "UpstreamClosed",
    "UpstreamListener",
    "UpstreamRouter",
    "UpstreamSet",
    "check_upstream",
    "effective_backend",
    "open_python_sources",
    "read_answer",
    "register_sources",
]
