"""MCP 2026-07-28's multi round-trip requests, as they cross the gateway's parts.

On that revision a server does not ask its client mid-call: it answers the call with an
`InputRequiredResult` (`resultType: "input_required"`, `inputRequests` keyed by names of the
server's choosing, an opaque `requestState`), and the client retries the same call with
`inputResponses` under the same keys and the `requestState` echoed. `InputRound` is such an
answer from a tool's server, `InputAnswer` what the retry brings it back; the wire's names
and the revision's `_meta` keys are declared here once, for the gateway's `/mcp` and for its
MCP upstreams alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

STATELESS_VERSION = "2026-07-28"
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
INPUT_REQUIRED = "input_required"  # the result's `resultType`
INPUT_REQUESTS = "inputRequests"
INPUT_RESPONSES = "inputResponses"
REQUEST_STATE = "requestState"


@dataclass(frozen=True)
class InputRound:
    """A server's `InputRequiredResult`: what it asks (`requests`, by its own keys, each a
    `{"method", "params"}`), and its own opaque state for the retry (None: it sent none)."""

    requests: dict[str, Any]
    state: str | None = None


@dataclass(frozen=True)
class InputAnswer:
    """A retry's `inputResponses` (by the server's keys) and the server's own `requestState`,
    as the server handed it out (None: it sent none)."""

    responses: dict[str, Any]
    state: str | None = None


__all__ = [
    "INPUT_REQUESTS",
    "INPUT_REQUIRED",
    "INPUT_RESPONSES",
    "META_CAPABILITIES",
    "META_VERSION",
    "REQUEST_STATE",
    "STATELESS_VERSION",
    "InputAnswer",
    "InputRound",
]
