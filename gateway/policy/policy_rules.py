"""The policy rules in force, and a call decided by them (docs/governance.md).

`Policies` holds the rules in force (conclave.toml's and the admin API's) and decides a call:
the rules whose globs match the caller and the tool (found once per caller and tool,
`gateway.policy.matching_rules`), in order; a `deny` whose condition holds refuses the call
(POLICY_DENIED naming it), whatever other rules say; else the first `approve` whose condition
holds asks for a person's approval of the exact call (`gateway.approvals` holds it). A
condition that cannot be evaluated for a call (an argument it reads is missing, a type does
not fit) counts as holding for a `deny` or an `approve` and as not holding for an `allow`: a
rule that cannot decide never opens what it was written to close.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gateway.gateway_error import GatewayError
from gateway.policy.compiled_rule import CompiledRule, any_holds
from gateway.policy.matching_rules import MatchingRules
from protocol import ErrorCode, PolicyRule, Principal

_KEPT = 4096  # callers and tools -> the rules that match, and OR-ed conditions: bounded
# tenant, agent, tool, its user, its scopes and its delegation chain: what `MatchingRules` fixes
_Caller = tuple[str, str, str, str | None, tuple[str, ...], tuple[str, ...]]


class Policies:
    """The rules in force: conclave.toml's (`file`), then the admin API's (`swap_api`)."""

    def __init__(self, file: Sequence[CompiledRule] = ()) -> None:
        self.file = tuple(file)
        self.api: tuple[CompiledRule, ...] = ()
        # Both, in order: a caller reads it first (empty: no rule, and nothing to call here).
        self.in_force = self.file
        self.version = 0  # the API rules' version in Redis, as last put in force here
        self._matching: dict[_Caller, MatchingRules] = {}
        self._merged: dict[tuple[str, ...], Any] = {}  # conditions -> one program OR-ing them

    def swap_api(self, rules: Sequence[CompiledRule], version: int) -> None:
        self.api, self.version = tuple(rules), version
        self.in_force = (*self.file, *self.api)
        self._matching = {}  # (the merged programs depend on the texts only: they stay)

    def refusal(
        self,
        principal: Principal,
        tool: str,
        arguments: Mapping[str, Any],
        chain: Sequence[str] = (),
    ) -> GatewayError | None:
        """POLICY_DENIED when a `deny` rule's condition holds for this call, else None."""
        decided = self.decide(principal, tool, arguments, chain)
        return decided if isinstance(decided, GatewayError) else None

    def decide(
        self,
        principal: Principal,
        tool: str,
        arguments: Mapping[str, Any],
        chain: Sequence[str] = (),
        usage: Mapping[str, Any] | None = None,
    ) -> GatewayError | PolicyRule | None:
        """POLICY_DENIED when a `deny` rule's condition holds for this call; else the first
        `approve` rule whose condition holds (the call waits for a person); else None.
        `chain`: whom the caller acts for ("tenant/agent", the first delegator first);
        `usage`: the caller's quota use, by quota and limit, when `reads_usage` says a rule
        reads it (else it is not needed)."""
        if not self.in_force:
            return None
        matching = self._matching_rules(principal, tool, chain)
        if not matching.decides:
            return None  # no rule, `allow` ones only, or none that holds for this caller
        denied, approve = matching.decide(arguments, usage)
        return _denied(denied, tool) if denied is not None else approve

    def reads_usage(self, principal: Principal, tool: str, chain: Sequence[str] = ()) -> bool:
        """Whether a rule this call must ask reads `usage` (a read of Redis, so only then)."""
        return bool(self.in_force) and self._matching_rules(principal, tool, chain).reads_usage

    def _matching_rules(
        self, principal: Principal, tool: str, chain: Sequence[str]
    ) -> MatchingRules:
        chain = tuple(chain)
        key = (principal.tenant, principal.agent, tool, principal.obo, principal.scopes, chain)
        matching = self._matching.get(key)
        return matching if matching is not None else self._match(key, principal, tool, chain)

    def _match(
        self, key: _Caller, principal: Principal, tool: str, chain: tuple[str, ...]
    ) -> MatchingRules:
        tenant, agent = principal.tenant, principal.agent
        rules = tuple(r for r in self.in_force if r.matches(tenant, agent, tool))
        found = MatchingRules(rules, principal, tool, chain, self._merged_program)
        if len(self._matching) >= _KEPT:
            self._matching.clear()
        self._matching[key] = found
        return found

    def _merged_program(self, conditions: tuple[str, ...]) -> Any:
        if conditions not in self._merged:
            if len(self._merged) >= _KEPT:
                self._merged.clear()
            self._merged[conditions] = any_holds(conditions)
        return self._merged[conditions]


def _denied(rule: PolicyRule, tool: str) -> GatewayError:
    why = f": {rule.reason}" if rule.reason else ""
    return GatewayError.of(
        ErrorCode.POLICY_DENIED,
        f"policy {rule.name!r} refuses this call of {tool!r}{why}",
        details={"policy": rule.name, "reason": rule.reason},
    )
