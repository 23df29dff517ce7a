"""Agent registration on the wire: what an admin asks for, and the identity it gets back.

An agent's rights become token scopes: each tool pattern a `tool:<pattern>` scope, each
namespace a `state:<namespace>:<access>` scope, each tool pattern it approves an
`approve:<pattern>` scope, so a token carries everything the gateway needs to authorize and
nothing in a request body can widen it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from protocol.identity import NAME_PATTERN, validate_scope

ADMIN_KEY_HEADER = "X-Conclave-Admin-Key"


class AgentRegistration(BaseModel):
    """Body of `POST /v1/agents` (admin only)."""

    model_config = ConfigDict(extra="forbid")

    tenant: str = Field(pattern=NAME_PATTERN)
    agent: str = Field(pattern=NAME_PATTERN)
    tools: list[str] = Field(default_factory=list, description="allow-list glob patterns")
    agents: list[str] = Field(
        default_factory=list, description="A2A agents it may call: allow-list glob patterns"
    )
    namespaces: dict[str, Literal["read", "write"]] = Field(default_factory=dict)
    approves: list[str] = Field(
        default_factory=list,
        description="tools whose held calls it may approve or deny: glob patterns",
    )
    delegable: list[str] = Field(
        default_factory=list,
        description="tool and state scopes it may hand on to the agents it delegates to, beyond"
        " its own ('tool:<glob>', 'state:<glob>:<access>')",
    )
    obo: str | None = Field(default=None, max_length=256, description="on-behalf-of user")
    token_ttl_s: int = Field(default=3600, gt=0, le=30 * 24 * 3600)

    @model_validator(mode="after")
    def _valid_scopes(self) -> AgentRegistration:
        """Refused here, before anything is stored, rather than when its token is issued."""
        for scope in self.scopes():
            validate_scope(scope)
        return self

    def scopes(self) -> list[str]:
        scopes = [f"tool:{pattern}" for pattern in self.tools]
        scopes += [f"agent:{pattern}" for pattern in self.agents]
        scopes += [f"approve:{pattern}" for pattern in self.approves]
        scopes += [f"state:{ns}:{access}" for ns, access in sorted(self.namespaces.items())]
        scopes += [f"delegate:{scope}" for scope in self.delegable]
        return scopes


class AgentRecord(BaseModel):
    """A registered agent as `GET /v1/agents` lists it."""

    model_config = ConfigDict(extra="forbid")

    tenant: str
    agent: str
    scopes: list[str]
    obo: str | None = None
    created_at_ms: int
    revoked: bool = False


class AgentToken(BaseModel):
    """Answer to a registration: the agent's own bearer token."""

    model_config = ConfigDict(extra="forbid")

    token: str
    tenant: str
    agent: str
    scopes: list[str]
    expires_at: int
