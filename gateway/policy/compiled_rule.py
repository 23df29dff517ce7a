"""A policy rule compiled once: its CEL program, the variables it reads, and its globs.

`compile_rules` turns `PolicyRule`s into `CompiledRule`s (CEL, by the
`common-expression-language` bindings: ~9 us an evaluation here, against ~210 us for
`cel-python`), refusing the whole set, with the rule's name and the position of the error, when
one does not compile; so a bad rule never replaces good ones. `any_holds` compiles the
conditions of several rules into one program that holds when any of them does: the rules a
call matches are asked once, not one by one (`gateway.policy.matching_rules`).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import cel

from gateway.policy.plain_conditions import PlainCondition, plain_condition
from protocol import PolicyRule


class PolicyError(ValueError):
    """A rule set that cannot be put in force; the message names the rule and the position."""


VARIABLES = frozenset({"principal", "tool", "args", "chain", "now", "usage"})


@dataclass(frozen=True)
class CompiledRule:
    rule: PolicyRule
    program: Any  # cel.Program, or None for a rule without a condition
    reads: frozenset[str] = frozenset()  # the VARIABLES its condition reads
    # found false in Python when it surely is, sparing the bindings (`plain_conditions`)
    plain: PlainCondition | None = None
    # the names of `args` it reads (`args.NAME`), or None when it may read more (`args[k]`)
    arg_names: frozenset[str] | None = None

    def matches(self, tenant: str, agent: str, tool: str) -> bool:
        rule = self.rule
        return (
            any_glob(rule.tenants, tenant)
            and any_glob(rule.agents, agent)
            and any_glob(rule.tools, tool)
        )

    def holds(self, variables: Any) -> bool:
        """Whether the condition holds for `variables` (a `cel.Context`, or a mapping). One
        that cannot be evaluated holds for a `deny` or an `approve` rule, never for an `allow`
        one: a rule that cannot decide never opens what it was written to close."""
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
    reads = VARIABLES & frozenset(program.variables())
    return CompiledRule(rule, program, reads, plain_condition(rule.when), _arg_names(rule.when))


_ARGS = re.compile(r"(?<![\w.])args\b(?:\s*\.\s*([A-Za-z_][A-Za-z0-9_]*))?")


def _arg_names(condition: str) -> frozenset[str] | None:
    """The names `condition` reads of `args` as `args.NAME`; None when `args` stands in it
    otherwise (`args["k"]`, `size(args)`, `args.?k`). Read from the text: a string that spells
    `args.x` adds a name, one that spells `args` alone gives None, each only ever more."""
    names = set()
    for found in _ARGS.finditer(condition):
        if found.group(1) is None:
            return None
        names.add(found.group(1))
    return frozenset(names)


def any_holds(conditions: Sequence[str]) -> Any:
    """One program over `conditions` (each compiles alone) that is `false` exactly when every
    one of them is `false`, or None when the bindings cannot compile it.

    CEL's `||` is true when either side is, whatever the other (even an error), and an error
    when neither is true and one side is not a bool: so `false` means no condition holds, and
    anything else sends the caller to ask each one (`CompiledRule.holds`), which then names the
    first that holds. A balanced tree keeps the parser's depth to log2 of the rules; each
    condition on lines of its own ends any `//` comment it has before the next one starts."""
    if len(conditions) < 2:
        return None

    def tree(part: Sequence[str]) -> str:
        if len(part) == 1:
            return f"(\n{part[0]}\n)"
        half = len(part) // 2
        return f"({tree(part[:half])} || {tree(part[half:])})"

    try:
        return cel.compile(tree(conditions))
    except (ValueError, RecursionError):
        return None
