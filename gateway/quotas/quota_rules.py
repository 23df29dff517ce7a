"""Which limits a call counts against: `Quotas` matches conclave.toml's `[[quota]]` rules to a
call's tenant, agent and tool (once per triple, then kept), and names each limit's counter.

Counter keys (in the tenant's hash slot, so one script counts a call against all its limits):
`cc:{t:<tenant>}:quota:<rule>:<subject>:<limit>:<window index>`, where the subject is the
tenant, `tenant/agent`, `tenant:tool` or `tenant/agent:tool` as the rule's `per` says, and the
window index is Redis's clock over the limit's window (`WINDOW_MS`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gateway.policy import any_glob
from protocol import QUOTA_LIMITS, QuotaLimit, QuotaRule

DAY_MS = 24 * 3600 * 1000
WINDOW_MS: dict[QuotaLimit, int] = {
    "calls_per_s": 1000,
    "calls_per_min": 60_000,
    "calls_per_day": DAY_MS,
    "cpu_s_per_day": DAY_MS,
}
_KEPT = 4096  # (tenant, agent, tool) -> limits: bounded


@dataclass(frozen=True)
class CountedLimit:
    """One limit of one quota as one caller's call counts against it."""

    rule: QuotaRule
    limit: QuotaLimit
    allowed: float  # in the counter's unit: calls, or CPU milliseconds
    subject: str
    counter: str  # the key without its window index

    @property
    def window_ms(self) -> int:
        return WINDOW_MS[self.limit]

    @property
    def charged_after(self) -> bool:
        """A budget charged with what the call used, after it ran (checked before it)."""
        return self.limit == "cpu_s_per_day"


def subject_of(rule: QuotaRule, tenant: str, agent: str, tool: str) -> str:
    subject = f"{tenant}/{agent}" if "agent" in rule.per else tenant
    return f"{subject}:{tool}" if "tool" in rule.per else subject


def counted_limits(rule: QuotaRule, tenant: str, agent: str, tool: str) -> list[CountedLimit]:
    subject = subject_of(rule, tenant, agent, tool)
    found = []
    for limit in QUOTA_LIMITS:
        value = getattr(rule, limit)
        if value is None:
            continue
        allowed = float(value) * 1000 if limit == "cpu_s_per_day" else float(value)
        counter = f"cc:{{t:{tenant}}}:quota:{rule.name}:{subject}:{limit}"
        found.append(CountedLimit(rule, limit, allowed, subject, counter))
    return found


def matches(rule: QuotaRule, tenant: str, agent: str, tool: str) -> bool:
    return (
        any_glob(rule.tenants, tenant)
        and any_glob(rule.agents, agent)
        and any_glob(rule.tools, tool)
    )


class Quotas:
    """The quota rules in force (conclave.toml's), matched to calls."""

    def __init__(self, rules: Sequence[QuotaRule] = ()) -> None:
        names = [r.name for r in rules]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"quota names must be unique: {', '.join(twice)}")
        self.rules = tuple(rules)
        self._limits: dict[tuple[str, str, str], tuple[CountedLimit, ...]] = {}

    def limits(self, tenant: str, agent: str, tool: str) -> tuple[CountedLimit, ...]:
        """Every limit a call of `tool` by `tenant/agent` counts against (none: not limited)."""
        key = (tenant, agent, tool)
        found = self._limits.get(key)
        if found is None:
            found = tuple(
                limit
                for rule in self.rules
                if matches(rule, tenant, agent, tool)
                for limit in counted_limits(rule, tenant, agent, tool)
            )
            if len(self._limits) >= _KEPT:
                self._limits.clear()
            self._limits[key] = found
        return found
