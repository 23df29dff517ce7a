"""Quotas: how many calls, and how much sandbox CPU, a tenant, an agent or a tool may use
(docs/governance.md). A quota matches tenants, agents and tools by glob (as grants and policy
rules do); the calls it matches share one count per `per` subject (the tenant's, each
agent's, each tool's, or each agent's of each tool), in fixed windows of Redis's clock (a
second, a minute, a UTC day), exact across replicas. Past a limit a call is refused
RATE_LIMITED (429) before any sandbox is touched, with `retry_after_ms` (the window's end)
and the quota named in `details`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from protocol.policy import RULE_NAME

QuotaLimit = Literal["calls_per_s", "calls_per_min", "calls_per_day", "cpu_s_per_day"]
QUOTA_LIMITS: tuple[QuotaLimit, ...] = (
    "calls_per_s",
    "calls_per_min",
    "calls_per_day",
    "cpu_s_per_day",
)


class QuotaRule(BaseModel):
    """One `[[quota]]` of conclave.toml."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=RULE_NAME)
    tenants: tuple[str, ...] = ("*",)
    agents: tuple[str, ...] = ("*",)
    tools: tuple[str, ...] = ("*",)
    # Whose calls share a count, always within one tenant: () the tenant's, ("agent",) each
    # agent's, ("tool",) each tool's, ("agent", "tool") each agent's of each tool.
    per: tuple[Literal["agent", "tool"], ...] = ()
    calls_per_s: int | None = Field(default=None, gt=0)
    calls_per_min: int | None = Field(default=None, gt=0)
    calls_per_day: int | None = Field(default=None, gt=0)
    cpu_s_per_day: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _limits_something(self) -> QuotaRule:
        if all(getattr(self, limit) is None for limit in QUOTA_LIMITS):
            raise ValueError(f"quota {self.name!r} limits nothing: set one of {QUOTA_LIMITS}")
        if len(set(self.per)) != len(self.per):
            raise ValueError(f"quota {self.name!r}: per names a subject twice")
        return self


class QuotaUse(BaseModel):
    """One limit of one quota as `GET /v1/quotas` shows it to a caller: what it used of it in
    the current window, what remains, and when the window ends."""

    model_config = ConfigDict(extra="forbid")

    quota: str
    subject: str  # tenant[/agent][:tool]
    limit: QuotaLimit
    allowed: float
    used: float
    remaining: float
    resets_at_ms: int
