"""The rules that match one caller and tool, made ready to decide its calls.

`Policies` finds them once per caller (tenant, agent, whom it acts for: its user and its
delegation chain, and its scopes) and tool. Per call, two things cost: converting the call's
variables to CEL, and crossing into the bindings to evaluate; on a serving gateway, whose
caches the rest of a call has filled, each crossing costs ~10 us (in a loop, ~0.2). So what
depends on the caller alone is settled here once: its variables (`principal`, `tool`,
`chain`) are converted into a `cel.Context` kept for its calls, which each call updates with
its own (`args`, `now`, `usage`); a condition reading nothing else is decided once, for this caller
(it holds for all its calls, or for none). Of the conditions that read the call, those of a
plain form are found false in Python when they surely are (`plain_conditions`, merged by
form and path into a few tests by `plain_checks`), and one program OR-ing the others
(`any_holds`) asks those, given only the arguments they name: a call no rule stops crosses
into the bindings at most once, whatever the number of rules, and not at all when every
condition is plain. Only when one may hold are the `deny` rules', then the `approve` rules',
asked by the bindings, by outcome and then one by one, in order, to name the first.
`decide` runs on the event loop, with no await between the update and the evaluations, so no
other call sees this call's variables.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import cel

from gateway.policy.compiled_rule import CompiledRule
from gateway.policy.plain_checks import any_may_hold
from protocol import PolicyRule, Principal

# Conditions' texts -> one program OR-ing them (`Policies` keeps them, shared by every key
# that matches the same rules: compiled once each, about 20 us a condition, 21 ms for 1,000).
Merged = Callable[[tuple[str, ...]], Any]
_CALLERS = frozenset({"principal", "tool", "chain"})  # fixed for one caller and tool


@dataclass(frozen=True)
class _OneOutcome:
    """The rules of one outcome, in order, for one caller: `asked`, whose conditions read the
    call, then `always`, the first whose condition holds for every call of this caller (the
    rules after it can never be the first to hold). Those that hold for none are left out."""

    asked: tuple[CompiledRule, ...]
    any_holds: Any  # cel.Program OR-ing the asked conditions; None: ask each (one, or none)
    always: PolicyRule | None

    def first_holding(self, variables: Any) -> PolicyRule | None:
        if not _may_hold(self.any_holds, variables):
            return self.always
        for compiled in self.asked:
            if compiled.holds(variables):
                return compiled.rule
        return self.always


class MatchingRules:
    """The rules in force that match one caller and tool, in order."""

    def __init__(
        self,
        rules: Sequence[CompiledRule],
        principal: Principal,
        tool: str,
        chain: Sequence[str],
        merged: Merged,
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
        if "chain" in reads:
            fixed["chain"] = list(chain)  # whom the caller acts for, the first first
        self._context = cel.Context(fixed)  # updated with each call's variables
        self.deny = _outcome(rules, "deny", self._context, merged)
        self.approve = _outcome(rules, "approve", self._context, merged)
        self._asked = (*self.deny.asked, *self.approve.asked)
        asked_reads = frozenset[str]().union(*(r.reads for r in self._asked))
        self._reads = asked_reads - _CALLERS
        # The asked conditions read the call alone: its variables go to the bindings as they
        # are, converted in the one evaluation (a kept context updated costs a conversion and
        # more), and into a context only when the rules are asked one by one.
        self._call_alone = not asked_reads & _CALLERS
        # `usage` (the caller's quota use) is read from Redis for the calls that need it only
        self.reads_usage = "usage" in self._reads
        # The conditions of plain forms are first found false in Python (`plain_conditions`);
        # one program asks all the others (one: its own), converting the call's variables
        # within it: on a serving gateway's cold caches each crossing costs ~10 us, not ~0.2.
        # Merged by form and path (`plain_checks`): 40 rules are a few tests, not 40.
        plain = [r.plain for r in self._asked if r.plain is not None]
        self._plain_may_hold = any_may_hold(plain) if plain else None
        rest = tuple(r for r in self._asked if r.plain is None)
        self._rest = bool(rest)  # (a merged program that did not compile: each is asked)
        # Only the arguments they read cross into the bindings: each name costs a conversion
        # (~5 us on a serving gateway: the bindings try a key as int, uint and bool first).
        whole = any(r.arg_names is None for r in rest)
        names = frozenset[str]().union(*(r.arg_names or () for r in rest))
        self._rest_args = None if whole else names
        only = rest[0].program if len(rest) == 1 else None
        self._rest_holds = only or (merged(tuple(r.rule.when for r in rest)) if rest else None)
        # Else nothing to evaluate: no rule, `allow` ones only, or none that can hold.
        self.decides = bool(self._asked or self.deny.always or self.approve.always)

    def decide(
        self, arguments: Mapping[str, Any], usage: Mapping[str, Any] | None = None
    ) -> tuple[PolicyRule | None, PolicyRule | None]:
        """The first `deny` rule that holds for this call, else the first `approve` one."""
        if self._asked:
            args = arguments if type(arguments) is dict else dict(arguments)
            plain = self._plain_may_hold
            may_hold = plain is not None and plain(args)
            if not may_hold and self._rest:
                read = self._rest_args
                asked = args if read is None else {k: v for k, v in args.items() if k in read}
                call = self._variables(asked, usage)
                bound = call if self._call_alone else self._bound(call)
                may_hold = _may_hold(self._rest_holds, bound)
            if may_hold:  # ask the rules by outcome and one by one, in a context made once
                bound = self._bound(self._variables(args, usage))
                denied = self.deny.first_holding(bound)
                if denied is not None:
                    return denied, None
                return None, self.approve.first_holding(bound)
        # No asked condition holds: what holds for every call of this caller decides.
        if self.deny.always is not None:
            return self.deny.always, None
        return None, self.approve.always

    def _variables(self, args: dict[str, Any], usage: Mapping[str, Any] | None) -> dict[str, Any]:
        """The call's own variables that the asked rules read, for the bindings."""
        reads, call = self._reads, dict[str, Any]()
        if "args" in reads:
            call["args"] = args
        if "now" in reads:
            call["now"] = datetime.datetime.now(datetime.UTC)
        if "usage" in reads:
            call["usage"] = dict(usage or {})
        return call

    def _bound(self, call: dict[str, Any]) -> Any:
        """A `cel.Context` of the call's variables (and the caller's, if asked rules read
        them), converted once for several evaluations."""
        if self._call_alone:
            return cel.Context(call)
        self._context.update(call)
        return self._context


def _may_hold(any_holds: Any, variables: Any) -> bool:
    """False when `any_holds` (OR-ed conditions) is false, so none of them holds; True when
    there is no such program, or one of them holds or cannot be evaluated (which holds for
    a `deny` or an `approve` rule)."""
    if any_holds is None:
        return True
    try:
        return any_holds.execute(variables) is not False
    except Exception:
        return True


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
