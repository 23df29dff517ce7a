"""Tool sources (docs/tools.md): the user's `python` modules and `mcp_stdio`
servers, run in sandboxes, and remote `mcp_http` upstreams, all served as `<source>.<tool>`.

One folder per kind, each with its prepare, discover and execute parts: `python`,
`mcp_stdio`, `mcp_http`; what they share (the client-requests channel, the HTTP/1.1 pool,
`UpstreamTool`, the sandboxed kinds' backend and cache) is in `shared`. Which executor runs
a tool is decided where its kind registers (`tools.calls.Placement`), which `SourceRouter` (the
dispatch stage's executor) reads; the configuration and the served names are
`tools.sources`'.
"""

from gateway.sources.mcp_http import (
    DEADLINE_META,
    TIMEOUT_META,
    HttpUpstream,
    SourceEvents,
    UpstreamCheck,
    UpstreamListener,
    UpstreamSet,
    check_upstream,
)
from gateway.sources.mcp_stdio import StdioSources
from gateway.sources.python import (
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
from gateway.sources.source_router import SourceRouter

__all__ = [
    "DEADLINE_META",
    "TIMEOUT_META",
    "ClientChannel",
    "Http1Answer",
    "HttpUpstream",
    "PythonSources",
    "SourceEvents",
    "SourceRouter",
    "StdioSources",
    "UpstreamCheck",
    "UpstreamClosed",
    "UpstreamListener",
    "UpstreamSet",
    "check_upstream",
    "effective_backend",
    "open_python_sources",
    "read_answer",
    "register_sources",
]
