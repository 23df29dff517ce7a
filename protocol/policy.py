"""Policy rules: conditions on a call's arguments, its caller and the time, decided in the
authorize stage (docs/governance.md). A rule matches tenants, agents and tools by glob (as
grants do) and, when its CEL condition `when` holds, its outcome applies: `deny` refuses the
call (SERF POLICY_DENIED, naming the rule and its reason), `approve` holds it until a person
approves these exact arguments (`protocol.approval`), `allow` lets it go on. A rule only
ever narrows what a token's scopes grant: no rule grants a tool the scopes do not."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

RULE_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$"


class PolicyRule(BaseModel):
    """One `[[policy]]` of conclave.toml, or one rule of `PUT /v1/policies`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=RULE_NAME)
    tenants: tuple[str, ...] = ("*",)
    agents: tuple[str, ...] = ("*",)
    tools: tuple[str, ...] = ("*",)
    # A CEL expression over principal, tool, args, chain, now and usage ("" : always)
    when: str = Field(default="", max_length=4096)
    outcome: Literal["allow", "deny", "approve"]
    reason: str = Field(default="", max_length=512)
    # `approve`: how long a held call waits for a person at most (its deadline may be sooner)
    approval_ttl_s: int = Field(default=300, gt=0, le=24 * 3600)


class PolicySet(BaseModel):
    """The rules set through the admin API (`PUT /v1/policies`): they replace the earlier
    ones, on every replica within a second; conclave.toml's stay in force beside them."""

    model_config = ConfigDict(extra="forbid")

    rules: list[PolicyRule] = Field(default_factory=list, max_length=1000)
