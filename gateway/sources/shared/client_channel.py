"""What an MCP source asks of the caller's client during a call, checked against what the
caller's request declared (MCP 2026-07-28: `MissingRequiredClientCapability`, -32021).

An upstream's tool may send the client a request of its own while it runs (on the call's
event stream): `sampling/createMessage`, `elicitation/create`, `roots/list`. Each needs a
client capability (`sampling`, `elicitation`, `roots`). On the 2026-07-28 wire every
request declares its client's capabilities in `_meta`; a call whose upstream asks for one
the request did not declare is stopped at once (the upstream is told the call was
cancelled) and refused with `CLIENT_CAPABILITY_MISSING`, naming the capability
(`details.requiredCapabilities`, the wire's `error.data.requiredCapabilities`), instead of
waiting until its time limit for an answer no one will give. On the handshake era the
gateway keeps no client's capabilities (it keeps no session), so nothing is checked there.

A catalog request forwarded to a source (`resources/read`, `prompts/get`) reaches its
caller's client the same way a call does: `/mcp` hands the source a `ClientChannel` (the
request's events, where the server's requests go; what a 2026-07-28 request declared; a
retry's answers to the source's own round), and the source asks through it as a call's
server does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from protocol import ErrorCode, SerfError
from tools.calls import NO_CLIENT, CallerClient, CallEvents

# The client capability each request an MCP server may send its client needs.
NEEDS = {
    "sampling/createMessage": "sampling",
    "elicitation/create": "elicitation",
    "roots/list": "roots",
}


@dataclass
class ClientRequestCheck:
    """Watches a call's messages from its upstream; `stop` ends the call on a request whose
    capability `declared` lacks (None: the handshake era, nothing checked)."""

    declared: Mapping[str, Any] | None
    stop: Callable[[], None]
    missing: dict[str, dict[str, Any]] = field(default_factory=dict)

    def asked(self, message: dict[str, Any]) -> None:
        """The upstream sent the client the request `message` (on a session that declared no
        client features: what a call without them runs on)."""
        needed = NEEDS.get(str(message.get("method")))
        if needed is not None and self.declared is not None and needed not in self.declared:
            self.missing[needed] = {}
            self.stop()


@dataclass(frozen=True)
class ClientChannel:
    """What a source's catalog request may ask its caller's client through (the same parts a
    tool call's `tools.calls.Invocation` carries): `events.request` for a server that asks
    mid-request (None: nobody can be asked), and `client` (`tools.calls.CallerClient`): the
    client features a 2026-07-28 request declared (None: the handshake era) and a retry's
    answers to the source's own round."""

    events: CallEvents | None = None
    client: CallerClient = NO_CLIENT


def capability_missing(source: str, tool: str, missing: Mapping[str, Any]) -> SerfError:
    names = ", ".join(sorted(missing))
    return SerfError.of(
        ErrorCode.CLIENT_CAPABILITY_MISSING,
        f"{tool} asks the client for {names}, which this request did not declare in _meta's"
        " io.modelcontextprotocol/clientCapabilities: declare it (and answer what it asks),"
        " or use another tool",
        details={"requiredCapabilities": dict(missing), "upstream": source},
    )


__all__ = ["NEEDS", "ClientChannel", "ClientRequestCheck", "capability_missing"]
