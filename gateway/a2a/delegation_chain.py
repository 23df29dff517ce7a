"""The delegation chain: the A2A agents a request went through before this one, carried from
hop to hop in `X-Conclave-Chain` and signed by the gateway (HMAC-SHA256 with its secret), so
an agent passes it on but cannot shorten or rewrite it. A request to an agent already on its
chain, or with `A2A_MAX_CHAIN` agents on it already, is refused DELEGATION_LOOP (the
authorize stage). The gateway hands the chain onward with every request it forwards to a
remote agent and with every task a hosted agent's worker claims; the SDK sends it back with
the delegations a worker makes for its task. A request without one starts a chain.
"""

from __future__ import annotations

import hashlib
import hmac

from gateway.gateway_error import GatewayError
from protocol import ErrorCode

_VERSION = "v1"
_SIGNATURE_HEX = 32


def _signature(agents: str, secret: bytes) -> str:
    digest = hmac.new(secret, f"{_VERSION}:{agents}".encode(), hashlib.sha256).hexdigest()
    return digest[:_SIGNATURE_HEX]


def read_chain(header: str | None, secret: bytes) -> tuple[str, ...]:
    """The agents on the chain `header` carries (none: a new chain); INVALID_REQUEST for a
    header the gateway did not sign as it is."""
    if not header:
        return ()
    version, _, rest = header.partition(".")
    agents, _, signature = rest.rpartition(".")
    if version != _VERSION or not hmac.compare_digest(signature, _signature(agents, secret)):
        raise GatewayError.of(
            ErrorCode.INVALID_REQUEST,
            "X-Conclave-Chain is not a chain this gateway signed: pass on the header you were"
            " given as it is, or send none to start a chain",
        )
    return tuple(agents.split(",")) if agents else ()


def onward(chain: tuple[str, ...], agent: str, secret: bytes) -> str:
    """The header for a request that `agent` makes on this chain's behalf."""
    agents = ",".join((*chain, agent))
    return f"{_VERSION}.{agents}.{_signature(agents, secret)}"
