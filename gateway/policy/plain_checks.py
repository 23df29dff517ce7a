"""The plain conditions a call must ask, merged into as few Python checks as their forms allow.

A call matched by many rules would pay a check per plain condition (`plain_conditions`), each
reading its argument and testing it: 40 such rules cost a serving gateway more than the one
crossing into CEL they spare. But only one thing is asked of them: whether any may hold. So
the tests of one form over one path become one test: `args.n > 5 || args.n > 9` is `args.n >
5`, twenty `startsWith`s are one `str.startswith` of a tuple, `==` and `in` lists one set; the
conditions behind one `has(args.X)` guard are asked only when X is there. `any_may_hold` gives
a function that answers False only when every condition is surely false for the call's
arguments (a value of another type, a missing key: the bindings decide, as for one check).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from gateway.policy.plain_conditions import Path, PlainCondition, PlainTest

MayHold = Callable[[dict[str, Any]], bool]  # False: every condition is surely false
_INT64 = range(-(2**63), 2**63)
_MISSING = object()


def any_may_hold(conditions: Sequence[PlainCondition]) -> MayHold:
    """Whether any of `conditions` may hold for a call's arguments (a dict)."""
    checks = _merged(conditions)
    if len(checks) <= 1:
        return checks[0] if checks else (lambda arguments: False)

    def may_hold(arguments: dict[str, Any]) -> bool:
        for check in checks:  # noqa: SIM110 (a loop: `any` of a generator costs a frame more)
            if check(arguments):
                return True
        return False

    return may_hold


def _merged(conditions: Sequence[PlainCondition]) -> list[MayHold]:
    bare: list[PlainTest] = []
    guarded: defaultdict[Path, list[PlainTest | None]] = defaultdict(list)
    for condition in conditions:
        if condition.guard is None:
            bare.append(condition.test)  # type: ignore[arg-type]  # a bare one has a test
        else:
            guarded[condition.guard].append(condition.test)
    tests: defaultdict[tuple[Path, str, str], list[Any]] = defaultdict(list)
    for test in bare:
        tests[test.path, test.form, test.op].append(test.operand)
    checks = [_test(*key, operands) for key, operands in tests.items()]
    checks += [_guarded(guard, behind) for guard, behind in guarded.items()]
    return checks


def _guarded(guard: Path, behind: list[PlainTest | None]) -> MayHold:
    """`has(args.GUARD) && ...` for each of `behind`: none holds when GUARD's last name is
    missing from a map; else they are asked (one with no plain test may hold)."""
    parent, last = guard[:-1], guard[-1]
    holder_at = _getter(parent) if parent else (lambda arguments: arguments)
    rest = None if None in behind else any_may_hold([PlainCondition(t) for t in behind if t])

    def may_hold(arguments: dict[str, Any]) -> bool:
        holder = holder_at(arguments)
        if type(holder) is not dict:
            return True  # the bindings' `has` on a non-map: theirs to answer
        if last not in holder:
            return False
        return rest is None or rest(arguments)

    return may_hold


def _test(path: Path, form: str, op: str, operands: list[Any]) -> MayHold:
    value_at = _getter(path)
    if form in ("compare", "size"):
        holds_for = _any_compare(op, operands)
        if form == "compare":
            return lambda arguments: _compared(value_at(arguments), holds_for)
        return lambda arguments: _sized(value_at(arguments), holds_for)
    if form == "text" or form == "among":
        listed: frozenset[Any] = (
            frozenset().union(*operands) if form == "among" else frozenset(operands)
        )
        if op == "!=":
            unless = _unless_each(listed)
            return lambda arguments: _texted(value_at(arguments), unless)
        return lambda arguments: _texted(value_at(arguments), listed.__contains__)
    texts = tuple(operands)
    if form == "contains":
        return lambda arguments: _texted(value_at(arguments), lambda v: any(t in v for t in texts))
    method = str.startswith if form == "startsWith" else str.endswith
    return lambda arguments: _texted(value_at(arguments), lambda v: method(v, texts))


def _any_compare(op: str, bounds: list[int]) -> Callable[[int], bool]:
    """`value OP b` for any b of `bounds`, as one test."""
    if op in (">", ">="):
        least = min(bounds)
        return (lambda v: v > least) if op == ">" else (lambda v: v >= least)
    if op in ("<", "<="):
        most = max(bounds)
        return (lambda v: v < most) if op == "<" else (lambda v: v <= most)
    listed = frozenset(bounds)
    if op == "==":
        return listed.__contains__
    return _unless_each(listed)


def _unless_each(listed: frozenset[Any]) -> Callable[[Any], bool]:
    """`value != b` for any b of `listed`: false only when `value` is each, so is the one."""
    if len(listed) > 1:
        return lambda v: True
    (only,) = listed
    return lambda v: v != only


def _compared(value: Any, holds_for: Callable[[int], bool]) -> bool:
    # bool, float, past int64, missing: the bindings' rules differ, they decide
    return type(value) is not int or value not in _INT64 or holds_for(value)


def _sized(value: Any, holds_for: Callable[[int], bool]) -> bool:
    sized = (type(value) is str and value.isascii()) or type(value) in (list, dict)
    return not sized or holds_for(len(value))


def _texted(value: Any, holds_for: Callable[[str], bool]) -> bool:
    return type(value) is not str or holds_for(value)


def _getter(path: Path) -> Callable[[dict[str, Any]], Any]:
    """The value at `path` in the call's arguments (a dict), or _MISSING when a step is not a
    dict holding the next name. One name, the common case, is one `dict.get`."""
    if len(path) == 1:
        name = path[0]
        return lambda arguments: arguments.get(name, _MISSING)

    def value_at(arguments: dict[str, Any]) -> Any:
        value: Any = arguments
        for name in path:
            if type(value) is not dict or name not in value:
                return _MISSING
            value = value[name]
        return value

    return value_at
