"""What the source kinds share: the channel for a tool server's requests to the calling
client (`client_requests`), the HTTP/1.1 connection pool remote MCP servers are spoken to
over (`http1_pool`), a tool as an MCP server declares it, with the SERF envelope of its failed
call (`upstream_tool`, for `mcp_http` and `mcp_stdio` both), the credential the gateway holds for
an upstream (`upstream_credential`, for `mcp_http` sources and A2A agents), and what preparing the
sandboxed kinds shares (`sandbox_prep`: backend, cache directory, discovery limits, and their
prepare steps' `pip_install`, `SourceUnavailable` and `packages_layer`)."""

from gateway.sources.shared.client_channel import (
    NEEDS,
    ClientChannel,
    ClientRequestCheck,
    capability_missing,
)
from gateway.sources.shared.http1_pool import (
    ANSWER_LIMIT,
    AnswerTooLarge,
    Http1Answer,
    Http1Pool,
    UpstreamClosed,
    read_answer,
)
from gateway.sources.shared.sandbox_prep import (
    DISCOVERY_LIMITS,
    SourceUnavailable,
    cache_root,
    effective_backend,
    packages_layer,
    pip_install,
)
from gateway.sources.shared.upstream_credential import (
    HoldsCredential,
    UpstreamConfigError,
    credential_headers,
)
from gateway.sources.shared.upstream_tool import UpstreamTool, tool_error

__all__ = [
    "ANSWER_LIMIT",
    "DISCOVERY_LIMITS",
    "NEEDS",
    "AnswerTooLarge",
    "ClientChannel",
    "ClientRequestCheck",
    "HoldsCredential",
    "Http1Answer",
    "Http1Pool",
    "SourceUnavailable",
    "UpstreamClosed",
    "UpstreamConfigError",
    "UpstreamTool",
    "cache_root",
    "capability_missing",
    "credential_headers",
    "effective_backend",
    "packages_layer",
    "pip_install",
    "read_answer",
    "tool_error",
]
