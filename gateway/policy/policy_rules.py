"""Policy rules compiled once and decided per call (docs/governance.md).

`compile_rules` turns `PolicyRule`s into programs (CEL, by the `common-expression-language`
bindings: ~9 us an evaluation here, against ~210 us for `cel-python`; a call's variables are
converted once, into one `cel.Context` all its rules read), refusing the whole set,
with the rule's name and the position of the error, when one does not compile; so a bad rule
never replaces good ones. `Policies` holds the rules in force (conclave.toml's and the admin
API's) and decides a call: the rules whose globs match the caller and the tool (looked up once
per tenant, agent and tool), in order; a `deny` whose condition holds refuses the call
(POLICY_DENIED naming it), whatever other rules say; else the first `approve` whose condition
holds asks for a person's approval of the exact call (`gateway.approvals` holds it). A
condition that cannot be evaluated for a call (an argument it reads is missing, a type does
not fit) counts as holding for a `deny` or an `approve` and as not holding for an `allow`: a
rule that cannot decide never opens what it was written to close.
"""

from __future__ import annotations

import datetime
import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import cel

from gateway.gateway_error import GatewayError
from protocol import ErrorCode, PolicyRule, Principal

_MATCHES_KEPT = 4096  # (tenant, agent, tool) -> the rules that match: bounded


class PolicyError(ValueError):
    """A rule set that cannot be put in force; the message names the rule and the position."""


VARIABLES = frozenset({"principal", "tool", "args", "chain", "now"})


@dataclass(frozen=True)
class CompiledRule:
    rule: PolicyRule
    program: Any  # cel.Program, or None for a rule without a condition
    reads: frozenset[str] = frozenset()  # the VARIABLES its condition reads

    def matches(self, tenant: str, agent: str, tool: str) -> bool:
        rule = self.rule
        return (
            any_glob(rule.tenants, tenant)
            and any_glob(rule.agents, agent)
            and any_glob(rule.tools, tool)
        )

    def holds(self, variables: Any) -> bool:
        """Whether the condition holds for `variables` (a `cel.Context`, or a mapping)."""
        if self.program is None:
            return True
        try:
            return self.program.execute(variables) is True
        except Exception:
            return self.rule.outcome != "allow"


def any_glob(patterns: Iterable[str], name: str) -> bool:
    """Whether any of `patterns` (globs, as grants' are) matches `name`."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def compile_rules(rules: Sequence[PolicyRule]) -> tuple[CompiledRule, ...]:
    """Every rule compiled, or PolicyError naming the first that does not compile."""
    names = [r.name for r in rules]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise PolicyError(f"rule names must be unique: {', '.join(twice)}")
    return tuple(_compiled(rule) for rule in rules)


def _compiled(rule: PolicyRule) -> CompiledRule:
    if not rule.when.strip():
        return CompiledRule(rule, None)
    try:
        program = cel.compile(rule.when)
    except ValueError as exc:
        raise PolicyError(f"rule {rule.name!r}: when does not compile: {exc}") from exc
    # (A name the condition reads that is none of the variables is not refused here: the
    # bindings count a comprehension's own variable among them. It fails at evaluation, which
    # denies for a `deny` rule and allows nothing for an `allow` one.)
    return CompiledRule(rule, program, VARIABLES & frozenset(program.variables()))


class Policies:
    """The rules in force: conclave.toml's (`file`), then the admin API's (`swap_api`)."""

    def __init__(self, file: Sequence[CompiledRule] = ()) -> None:
        self.file = tuple(file)
        self.api: tuple[CompiledRule, ...] = ()
        # Both, in order: a caller reads it first (empty: no rule, and nothing to call here).
        self.in_force = self.file
        self.version = 0  # the API rules' version in Redis, as last put in force here
        # (tenant, agent, tool) -> the rules that match, and the variables they read
        self._matching: dict[tuple[str, str, str], _Matching] = {}

    def swap_api(self, rules: Sequence[CompiledRule], version: int) -> None:
        self.api, self.version = tuple(rules), version
        self.in_force = (*self.file, *self.api)
        self._matching = {}

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
    ) -> GatewayError | PolicyRule | None:
        """POLICY_DENIED when a `deny` rule's condition holds for this call; else the first
        `approve` rule whose condition holds (the call waits for a person); else None.
        `chain`: whom the caller acts for ("tenant/agent", the first delegator first)."""
        if not self.in_force:
            return None
        key = (principal.tenant, principal.agent, tool)
        found = self._matching.get(key)
        if found is None:
            rules = tuple(
                r
                for r in (*self.file, *self.api)
                if r.matches(principal.tenant, principal.agent, tool)
            )
            found = _Matching(rules, frozenset().union(*(r.reads for r in rules)))
            if len(self._matching) >= _MATCHES_KEPT:
                self._matching.clear()
            self._matching[key] = found
        matching = found.rules
        if not matching:
            return None
        # One context a call, holding only what its rules read, converted to CEL once for all
        # of them (a fresh dict a rule was converted again: ~15 us a rule, against ~0.3 us).
        variables = cel.Context(_variables(found.reads, principal, tool, arguments, chain))
        approve: PolicyRule | None = None
        for compiled in matching:
            outcome = compiled.rule.outcome
            if outcome == "allow" or (outcome == "approve" and approve is not None):
                continue
            if compiled.holds(variables):
                if outcome == "deny":
                    return _denied(compiled.rule, tool)
                approve = compiled.rule
        return approve


@dataclass(frozen=True)
class _Matching:
    rules: tuple[CompiledRule, ...]
    reads: frozenset[str]


def _variables(
    reads: frozenset[str],
    principal: Principal,
    tool: str,
    arguments: Mapping[str, Any],
    chain: Sequence[str],
) -> dict[str, Any]:
    """The variables among `reads`: converting the others to CEL was most of a call's cost."""
    found: dict[str, Any] = {}
    if "principal" in reads:
        found["principal"] = {
            "tenant": principal.tenant,
            "agent": principal.agent,
            "obo": principal.obo or "",
            "scopes": list(principal.scopes),
        }
    if "tool" in reads:
        found["tool"] = {"name": tool}
    if "args" in reads:
        found["args"] = dict(arguments)
    if "chain" in reads:
        found["chain"] = list(chain)  # whom the caller acts for (gateway.delegation), first first
    if "now" in reads:
        found["now"] = datetime.datetime.now(datetime.UTC)
    return found


def _denied(rule: PolicyRule, tool: str) -> GatewayError:
    why = f": {rule.reason}" if rule.reason else ""
    return GatewayError.of(
        ErrorCode.POLICY_DENIED,
        f"policy {rule.name!r} refuses this call of {tool!r}{why}",
        details={"policy": rule.name, "reason": rule.reason},
    )
