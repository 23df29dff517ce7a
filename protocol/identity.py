"""Who is asking: token claims, the principal built from them, and the scope grammar.

Scopes are plain strings so they fit a JWT and an admin's command line:

- ``tool:<glob>``            may list and call tools whose name matches the glob
- ``state:<glob>:read``      may read state namespaces matching the glob
- ``state:<glob>:write``     may read and write them (write implies read)
- ``agent:<glob>``           may call (delegate to) the A2A agents whose name matches the glob
- ``approve:<glob>``         may approve or deny its tenant's calls held for approval of the
                             tools whose name matches the glob (docs/governance.md)
- ``delegate:<scope>``       may hand a tool or state scope on to the agents it delegates to,
                             beyond its own (`gateway.delegation`: what an agent does for
                             another is limited to what that one may hand on)

There is no admin scope: the admin API (agents, audit) takes the gateway's admin key only, so
no agent token, however it was issued, can manage identities. Namespaces are always the
caller's tenant's: a scope never reaches another tenant.

Every token carries its agent's generation (`gen`): registering or revoking the agent moves the
generation on, and the gateway refuses a token whose generation is not the current one.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

_NAME = r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}"
NAME_PATTERN = rf"^{_NAME}$"
_GRANT = r"(tool:[A-Za-z0-9_.\-*?]+|state:[A-Za-z0-9_.\-*?]+:(read|write))"
_SCOPE = re.compile(rf"^((agent|approve):[A-Za-z0-9_.\-*?]+|{_GRANT}|delegate:{_GRANT})$")

Access = Literal["read", "write"]


def validate_scope(scope: str) -> str:
    if not _SCOPE.fullmatch(scope):  # fullmatch: "$" would let a trailing newline in
        raise ValueError(
            f"scope {scope!r} is not one of 'tool:<glob>', 'agent:<glob>', 'approve:<glob>', "
            "'state:<glob>:read', 'state:<glob>:write', 'delegate:<a tool or state scope>'"
        )
    return scope


class TokenClaims(BaseModel):
    """The JWT payload Conclave issues and accepts."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    sub: str = Field(pattern=NAME_PATTERN, description="agent id")
    tenant: str = Field(pattern=NAME_PATTERN)
    obo: str | None = Field(default=None, max_length=256, description="on-behalf-of user")
    scopes: tuple[str, ...] = ()
    iat: int = Field(ge=0)
    exp: int = Field(ge=0)
    jti: str = Field(min_length=1, max_length=128)
    iss: str = "conclave"
    gen: int = Field(default=0, ge=0, description="the agent's generation when issued")
    # A task token's (a hosted A2A agent's worker gets one with each task): the signed
    # delegation chain it is bound to, so every request made with it acts for that chain,
    # whatever headers it carries or omits.
    chain: str = Field(default="", max_length=16384)

    @field_validator("scopes")
    @classmethod
    def _valid_scopes(cls, scopes: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(validate_scope(s) for s in scopes)


class Principal(BaseModel):
    """The authenticated caller. Built by the gateway, never taken from a request body."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tenant: str
    agent: str
    obo: str | None = None
    scopes: tuple[str, ...] = ()
    expires_at: int
    token_id: str
    generation: int = 0
    chain: str = ""  # the delegation chain its token is bound to ('': none; TokenClaims.chain)

    @classmethod
    def from_claims(cls, claims: TokenClaims) -> Principal:
        return cls(
            tenant=claims.tenant,
            agent=claims.sub,
            obo=claims.obo,
            scopes=claims.scopes,
            expires_at=claims.exp,
            token_id=claims.jti,
            generation=claims.gen,
            chain=claims.chain,
        )

    def may_call(self, tool: str) -> bool:
        patterns = (s[len("tool:") :] for s in self.scopes if s.startswith("tool:"))
        return any(fnmatch.fnmatchcase(tool, pattern) for pattern in patterns)

    def may_delegate(self, agent: str) -> bool:
        """May call the A2A agent served as `agent` (an `agent:<glob>` scope covers it)."""
        patterns = (s[len("agent:") :] for s in self.scopes if s.startswith("agent:"))
        return any(fnmatch.fnmatchcase(agent, pattern) for pattern in patterns)

    def may_approve(self, tool: str) -> bool:
        """May approve or deny its tenant's held calls of `tool` (an `approve:<glob>` scope)."""
        patterns = (s[len("approve:") :] for s in self.scopes if s.startswith("approve:"))
        return any(fnmatch.fnmatchcase(tool, pattern) for pattern in patterns)

    def may_access(self, namespace: str, access: Access) -> bool:
        for scope in self.scopes:
            if not scope.startswith("state:"):
                continue
            pattern, granted = scope[len("state:") :].rsplit(":", 1)
            if fnmatch.fnmatchcase(namespace, pattern) and (granted == "write" or access == "read"):
                return True
        return False

    def may_see_namespace(self, namespace: str) -> bool:
        return self.may_access(namespace, "read")
