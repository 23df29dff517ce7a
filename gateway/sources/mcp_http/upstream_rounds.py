"""An `mcp_http` upstream's calls on MCP 2026-07-28's own wire (`wire = "2026-07-28"`), where
the upstream asks the client in rounds itself.

On that wire a server does not send its client requests mid-call: it answers the call with an
`InputRequiredResult` (its questions under its own keys, and its own opaque `requestState`),
and the client retries the call with `inputResponses` and that state. Such an upstream is
called this way for a 2026-07-28 client only (a handshake-era client's calls take the
source's session, as every other source's do):

- the request carries the revision's envelope in `_meta`: the version, and the client
  features its request declared (`protocol.client_capabilities`: the upstream asks only what
  the client can answer, and sees nothing else the client declared), plus the retry's
  `inputResponses` and the upstream's own `requestState` (`protocol.InputAnswer`), both
  exactly as the upstream handed them out;
- an `InputRequiredResult` answer is a round (`protocol.InputRound`), kept as the upstream
  sent it: the gateway's `/mcp` seals the upstream's state into its own and asks the client.
  One that asks the client for a feature its request did not declare is refused
  (CLIENT_CAPABILITY_MISSING, as for a handshake-era upstream's request), one that is not
  the revision's shape is the upstream's failure (TOOL_FAILED).

At discovery (`check_wire`), such an upstream must list 2026-07-28 in its `server/discover`,
else it is not served (logged, and tried again), never silently called on another wire.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.sources.mcp_http.mcp_session import McpSession
from gateway.sources.shared import NEEDS, capability_missing
from protocol import (
    INPUT_REQUESTS,
    INPUT_REQUIRED,
    INPUT_RESPONSES,
    META_CAPABILITIES,
    META_VERSION,
    REQUEST_STATE,
    STATELESS_VERSION,
    ErrorCode,
    InputAnswer,
    InputRound,
    SerfError,
    client_capabilities,
)

RESULT_TYPE = "resultType"


class UpstreamWireError(Exception):
    """The upstream does not serve the wire its source names."""


def envelope(capabilities: Mapping[str, Any]) -> dict[str, Any]:
    """The revision's `_meta` keys for a request declaring the client's `capabilities`."""
    return {META_VERSION: STATELESS_VERSION, META_CAPABILITIES: dict(capabilities)}


async def check_wire(session: McpSession, source: str) -> None:
    """UpstreamWireError unless the upstream serves 2026-07-28 (its `server/discover`)."""
    try:
        found = await session.request_stateless("server/discover", {"_meta": envelope({})})
    except Exception as exc:
        raise UpstreamWireError(
            f"source {source!r} has wire = {STATELESS_VERSION!r}, but its server/discover"
            f" failed ({type(exc).__name__}: {exc}): upgrade the server, or set wire ="
            ' "handshake"'
        ) from exc
    versions = found.get("supportedVersions")
    if not isinstance(versions, list) or STATELESS_VERSION not in versions:
        raise UpstreamWireError(
            f"source {source!r} has wire = {STATELESS_VERSION!r}, but its server/discover"
            f' lists {versions!r}: set wire = "handshake"'
        )


def call_params(
    params: dict[str, Any], capabilities: Mapping[str, Any], answer: InputAnswer | None
) -> dict[str, Any]:
    """`tools/call`'s `params` on the revision's wire: its envelope, and a retry's answers."""
    kept = client_capabilities(capabilities)  # the client features alone, in a kept shape
    stateless = {**params, "_meta": {**params.get("_meta", {}), **envelope(kept)}}
    if answer is not None:
        stateless[INPUT_RESPONSES] = answer.responses
        if answer.state is not None:
            stateless[REQUEST_STATE] = answer.state
    return stateless


def input_round(
    result: dict[str, Any], source: str, tool: str, declared: Mapping[str, Any]
) -> InputRound | SerfError | None:
    """The round `result` asks for (None: it is the call's result), or why it is refused."""
    if result.get(RESULT_TYPE) != INPUT_REQUIRED:
        return None
    requests = result.get(INPUT_REQUESTS, {})
    state = result.get(REQUEST_STATE)
    shaped = isinstance(requests, dict) and all(
        isinstance(r, dict) and isinstance(r.get("method"), str) for r in requests.values()
    )
    if not shaped or (state is not None and not isinstance(state, str)) or not (requests or state):
        return SerfError.of(
            ErrorCode.TOOL_FAILED,
            f"{tool} on upstream {source!r} answered an InputRequiredResult that is not"
            " MCP's (inputRequests a map of requests, requestState a string, one of them)",
            details={"upstream": source},
        )
    missing: dict[str, dict[str, Any]] = {
        NEEDS[r["method"]]: {}
        for r in requests.values()
        if r["method"] in NEEDS and NEEDS[r["method"]] not in declared
    }
    if missing:
        return capability_missing(source, tool, missing)
    return InputRound(dict(requests), state)


__all__ = ["UpstreamWireError", "call_params", "check_wire", "envelope", "input_round"]
