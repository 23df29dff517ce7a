"""The rules that match one caller and tool, made ready to decide its calls.

`Policies` finds them once per caller (tenant, agent, whom it acts for, scopes) and tool. Per
call, two things cost: converting the call's variables to CEL, and crossing into the bindings
once a condition. So what depends on the caller alone is settled here once: its variables
(`principal`, `tool`) are converted into a `cel.Context` kept for its calls, which each call
updates with its own (`args`, `chain`, `now`); a condition reading nothing else is decided
once, for this caller (it holds for all its calls, or for none). And the rules of an outcome
whose conditions read the call are asked together, by one program OR-ing their conditions
(`any_holds`): a call no rule stops is one evaluation for the `deny` rules and one for the
`approve` ones, whatever their number; only when one may hold are they asked one by one, in
order, to name it. `decide` runs on the event loop, with no await between the update and the
evaluations, so no other call sees this call's variables.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import cel

from gateway.policy.compiled_rule import CompiledRule
from protocol import PolicyRule, Principal

# Conditions' texts -> one program OR-ing them (`Policies` keeps them, shared by every key
# that matches the same rules: compiled once each, about 20 us a condition, 21 ms for 1,000).
Merged = Callable[[tuple[str, ...]], Any]
_CALLERS = frozenset({"principal", "tool"})  # the variables fixed for one caller and tool


@dataclass(frozen=True)
class _OneOutcome:
    """The rules of one outcome, in order, for one caller: `asked`, whose conditions read the
    call, then `always`, the first whose condition holds for every call of this caller (the
    rules after it can never be the first to hold). Those that hold for none are left out."""

    asked: tuple[CompiledRule, ...]
    any_holds: Any  # cel.Program OR-ing the asked conditions; None: ask each (one, or none)
    always: PolicyRule | None

    def first_holding(self, variables: Any) -> PolicyRule | None:
        if self.any_holds is not None:
            try:
                if self.any_holds.execute(variables) is False:
                    return self.always  # no asked condition holds
            except Exception:
                pass  # one cannot be evaluated, which holds for deny and approve: find it
        for compiled in self.asked:
            if compiled.holds(variables):
                return compiled.rule
        return self.always


class MatchingRules:
    """The rules in force that match one caller and tool, in order."""

    def __init__(
        self, rules: Sequence[CompiledRule], principal: Principal, tool: str, merged: Merged
    ) -> None:
        reads = frozenset[str]().union(*(r.reads for r in rules))
        fixed: dict[str, Any] = {}
        if "principal" in reads:
            fixed["principal"] = {
                "tenant": principal.tenant,
                "agent": principal.agent,
                "obo": principal.obo or "",
                "scopes": list(principal.scopes),
            }
        if "tool" in reads:
            fixed["tool"] = {"name": tool}
        self._context = cel.Context(fixed)  # updated with each call's variables
        self.deny = _outcome(rules, "deny", self._context, merged)
        self.approve = _outcome(rules, "approve", self._context, merged)
        asked = (*self.deny.asked, *self.approve.asked)
        self._reads = frozenset[str]().union(*(r.reads for r in asked)) - _CALLERS
        # Else nothing to evaluate: no rule, `allow` ones only, or none that can hold.
        self.decides = bool(asked or self.deny.always or self.approve.always)

    def decide(
        self, arguments: Mapping[str, Any], chain: Sequence[str]
    ) -> tuple[PolicyRule | None, PolicyRule | None]:
        """The first `deny` rule that holds for this call, else the first `approve` one."""
        reads, call = self._reads, dict[str, Any]()
        if "args" in reads:
            call["args"] = dict(arguments)
        if "chain" in reads:
            call["chain"] = list(chain)  # whom the caller acts for, the first first
        if "now" in reads:
            call["now"] = datetime.datetime.now(datetime.UTC)
        if call:
            self._context.update(call)
        denied = self.deny.first_holding(self._context)
        if denied is not None:
            return denied, None
        return None, self.approve.first_holding(self._context)


def _outcome(
    rules: Sequence[CompiledRule], outcome: str, fixed: Any, merged: Merged
) -> _OneOutcome:
    asked: list[CompiledRule] = []
    always: PolicyRule | None = None
    for compiled in rules:
        if compiled.rule.outcome != outcome:
            continue
        if compiled.reads <= _CALLERS:  # no condition, or one reading the caller alone
            if compiled.holds(fixed):
                always = compiled.rule
                break
            continue  # holds for none of this caller's calls
        asked.append(compiled)
    program = merged(tuple(r.rule.when for r in asked)) if len(asked) > 1 else None
    return _OneOutcome(tuple(asked), program, always)
