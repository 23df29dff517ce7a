"""The delegation chain: the A2A agents a request went through before this one, and who
delegated to each with what it may hand on, carried from hop to hop in `X-Conclave-Chain` and
signed by the gateway (HMAC-SHA256 with its secret), so an agent passes it on but cannot
shorten, widen or rewrite it.

A request to an agent already on its chain, or with `A2A_MAX_CHAIN` agents on it already, is
refused DELEGATION_LOOP (the authorize stage). The gateway writes the onward chain in
authorize, once the caller is known, and hands it to a remote agent with every request and
to a hosted agent's worker with its task; the SDK sends it back with every request the worker
makes for that task (its tool calls, state operations and delegations). A request without
one acts for nobody but its caller.

The confused deputy: B working for A does no more than B's own grants allow *and* what A may
delegate, at every hop of the chain. What a delegator may delegate is its token's `tool:` and
`state:` scopes plus what the operator granted it to hand on beyond them (`delegate:` scopes,
a registration's `delegable`); `agent:` scopes are not handed on (whom B may ask is B's own
grant; what they do for it is bounded by this chain in turn). It is written into the chain
from the delegator's token as it delegates, so checking it costs no Redis read.

A hosted agent's task is on the chain its worker is given (`tasks`, "agent/task id"), so
everything done for it, at any depth, names it: ending it cancels them (`TaskCascade`).

Header: `v2.<payload>.<signature>`, the payload base64url JSON
`{"agents": [...], "by": [[tenant, agent, obo, [grant...]], ...], "tasks": [...]}` (`by[i]`
delegated to `agents[i]`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from gateway.gateway_error import GatewayError
from protocol import Access, ErrorCode, Principal
from tools import RegisteredTool

_VERSION = "v2"
_SIGNATURE_HEX = 32
_READ_KEPT = 1024  # verified headers kept: a worker sends the same one with each call
DELEGATE = "delegate:"  # a scope the operator granted to hand on: delegate:tool:<glob>, ...
_HANDED_ON = ("tool:", "state:")


@dataclass(frozen=True, slots=True)
class Delegator:
    """Who delegated one hop, and the scopes it could hand on (`grant`: a principal whose
    scopes are those, so a tool's names and a namespace's access are matched exactly as for
    a caller)."""

    tenant: str
    agent: str
    obo: str | None
    grant: Principal

    @property
    def identity(self) -> str:
        return f"{self.tenant}/{self.agent}"


@dataclass(frozen=True, slots=True)
class DelegationChain:
    """The agents a request went through (`agents`), who delegated to each (`by`), and the
    hosted tasks it is done for (`tasks`, the first delegation's first)."""

    agents: tuple[str, ...] = ()
    by: tuple[Delegator, ...] = ()
    tasks: tuple[str, ...] = ()
    # Whom the caller acts for, `tenant/agent`, the first delegator first: what the audit
    # records and policies see as `chain`. Made with the chain, so reading it on every call
    # (the audit record, the policies) runs no code: most calls carry none.
    acting_for: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "acting_for", tuple(d.identity for d in self.by))

    def tool_refusal(self, principal: Principal, tool: RegisteredTool) -> GatewayError | None:
        """POLICY_DENIED when a delegator on the chain may not hand `tool` on."""
        for delegator in self.by:
            if not tool.callable_by(delegator.grant):
                what, scope = f"call {tool.name!r}", f"tool:{tool.name}"
                return self._denied(principal, delegator, what, scope)
        return None

    def namespace_refusal(
        self, principal: Principal, namespace: str, access: Access
    ) -> GatewayError | None:
        """POLICY_DENIED when a delegator on the chain may not hand on `access` to
        `namespace`."""
        for delegator in self.by:
            if not delegator.grant.may_access(namespace, access):
                scope = f"state:{namespace}:{access}"
                return self._denied(principal, delegator, f"{access} {namespace!r}", scope)
        return None

    def _denied(
        self, principal: Principal, delegator: Delegator, what: str, scope: str
    ) -> GatewayError:
        chain = " -> ".join((*self.acting_for, f"{principal.tenant}/{principal.agent}"))
        return GatewayError.of(
            ErrorCode.POLICY_DENIED,
            f"{principal.tenant}/{principal.agent} works for {delegator.identity} here"
            f" ({chain}), which may not {what} itself nor hand it on: answer without it, or"
            f" have the operator grant that delegation ({delegator.identity}'s registration"
            f' with delegable = ["{scope}"])',
            details={"policy": "delegation", "chain": self.acting_for, "grant": scope},
        )


NO_CHAIN = DelegationChain()


def delegable(principal: Principal) -> tuple[str, ...]:
    """What `principal` may hand on to an agent it delegates to: its own tool and state
    scopes, and those the operator granted it to delegate (`delegate:<scope>`)."""
    own = [s for s in principal.scopes if s.startswith(_HANDED_ON)]
    granted = [s[len(DELEGATE) :] for s in principal.scopes if s.startswith(DELEGATE)]
    return tuple(dict.fromkeys((*own, *granted)))


class ChainSigner:
    """Reads and writes chains with the gateway's secret."""

    def __init__(self, secret: bytes) -> None:
        self._secret = secret
        self._read: dict[str, DelegationChain] = {}

    def _signature(self, payload: str) -> str:
        digest = hmac.new(self._secret, f"{_VERSION}:{payload}".encode(), hashlib.sha256)
        return digest.hexdigest()[:_SIGNATURE_HEX]

    def read(self, header: str) -> DelegationChain:
        """The chain `header` carries (empty: none); INVALID_REQUEST for one the gateway did
        not sign as it is."""
        if not header:
            return NO_CHAIN
        known = self._read.get(header)
        if known is not None:
            return known
        version, _, rest = header.partition(".")
        payload, _, signature = rest.rpartition(".")
        if version != _VERSION or not hmac.compare_digest(signature, self._signature(payload)):
            raise GatewayError.of(
                ErrorCode.INVALID_REQUEST,
                "X-Conclave-Chain is not a chain this gateway signed: pass on the header you"
                " were given as it is, or send none to start a chain",
            )
        chain = _decoded(payload)
        if len(self._read) >= _READ_KEPT:
            self._read.clear()
        self._read[header] = chain
        return chain

    def onward(
        self, chain: DelegationChain, agent: str, principal: Principal, task: str | None = None
    ) -> str:
        """The header for what `agent` does on this chain's behalf, `principal` delegating
        (for hosted task `task`, "agent/task id", when it is one)."""
        by = [[d.tenant, d.agent, d.obo, list(d.grant.scopes)] for d in chain.by]
        by.append([principal.tenant, principal.agent, principal.obo, list(delegable(principal))])
        tasks = [*chain.tasks, task] if task is not None else list(chain.tasks)
        document = {"agents": [*chain.agents, agent], "by": by, "tasks": tasks}
        raw = json.dumps(document, separators=(",", ":")).encode()
        payload = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        return f"{_VERSION}.{payload}.{self._signature(payload)}"


def _decoded(payload: str) -> DelegationChain:
    document = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return DelegationChain(
        tuple(document["agents"]),
        tuple(_delegator(entry) for entry in document["by"]),
        tuple(document.get("tasks", ())),
    )


def _delegator(entry: Sequence[object]) -> Delegator:
    tenant, agent, obo, grant = entry
    assert isinstance(tenant, str) and isinstance(agent, str) and isinstance(grant, list)
    holder = Principal(
        tenant=tenant, agent=agent, scopes=tuple(grant), expires_at=0, token_id="delegation"
    )
    return Delegator(tenant, agent, obo if isinstance(obo, str) else None, holder)
