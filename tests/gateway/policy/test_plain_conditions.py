"""Conditions found false in Python (`gateway.policy.plain_conditions`, merged into checks by
`plain_checks`) against the CEL bindings themselves: the checks may answer False only where
the bindings answer false for every condition asked, and they do answer for the plain cases
they exist for, alone and merged with others of the same form and path."""

from __future__ import annotations

import random
from typing import Any

import cel
import pytest

from gateway.policy.plain_checks import any_may_hold
from gateway.policy.plain_conditions import PlainCondition, plain_condition

CONDITIONS = [
    "args.n > 10", "args.n >= -3", "args.n == 7", "args.n != 7", "args.n < 0", "args.n <= 5",
    "args . a.b > 1", "size(args.s) > 3", "size(args.s) <= 2", "size( args.l ) == 2",
    'args.s == "hi"', "args.s != 'hi'", 'args.s.startsWith("h")', "args.s.endsWith('i')",
    'args.s.contains("é")', 'has(args.o) && args.o == "3"', "has(args.a.b) && args.a.b > 1",
    "has(args.s) && size(args.s) > 2", "args.s in ['hi', \"ab\"]", 'args.s in [ "é" ]',
    "has(args.l) && args.l.exists(x, x > 1)", "has(args.a) && args.a.b > 1 && true",
    "has(args.o) && (args.o == 1 || args.n > 3)", "has(args.s) && args.s.matches('^h') ",
    # a chain of && is false when any plain part is, even beside one CEL cannot evaluate
    "args.s.startsWith('h') && size(args.s) * 2 > 3", "now.getHours() >= 0 && args.n > 3",
    "has(args.a) && args.a.b > 0 && args.a.b * 2 < 10", "has(args.l)",
]  # fmt: skip
# the same forms over the same paths, for the merged checks to fold together
MORE = [
    "args.n > 3", "args.n >= 12", "args.n == 11", "args.n != 11", "args.n < -2", "args.n <= 0",
    "size(args.s) > 1", "size(args.s) <= 0", "size(args.l) == 0", 'args.s == "ab"',
    "args.s != 'ab'", 'args.s.startsWith("a")', "args.s.endsWith('b')", 'args.s.contains("b")',
    "args.s in ['x']", 'has(args.o) && args.o == "4"', "has(args.a.b) && args.a.b > 3",
]  # fmt: skip
VALUES: list[Any] = [
    0, 1, 3, 7, 10, 11, -5, 2**63 - 1, 2**63, 2**70, True, False, 1.5, 10.0, None, "", "3",
    "hi", "hello", "é", "éé", "ab", "h\u00e9", [], [1, 2], {}, {"b": 0}, {"b": 5}, {"x": 1},
]  # fmt: skip
ARGUMENTS = [{}, *({key: value} for key in "nslao" for value in VALUES)]


def _bindings(condition: str, arguments: dict[str, Any]) -> Any:
    try:
        return cel.compile(condition).execute({"args": arguments})
    except Exception as exc:
        return exc


def _parsed(condition: str) -> PlainCondition:
    parsed = plain_condition(condition)
    assert parsed is not None, f"a plain form was not recognised: {condition}"
    return parsed


@pytest.mark.parametrize("condition", CONDITIONS + MORE)
def test_a_check_says_false_only_where_the_bindings_do(condition: str) -> None:
    may_hold = any_may_hold([_parsed(condition)])
    said_false = 0
    for arguments in ARGUMENTS:
        if not may_hold(arguments):
            said_false += 1
            assert _bindings(condition, arguments) is False, arguments
    assert said_false >= 1  # it spares the bindings the plain cases


def test_merged_checks_say_false_only_where_every_condition_is_false() -> None:
    """Sets of conditions, of the same forms and paths and of others, asked together: False
    only when the bindings find each of them false, and False for some calls."""
    pool = CONDITIONS + MORE
    answers = {c: [_bindings(c, a) is False for a in ARGUMENTS] for c in pool}
    chosen = random.Random(42)
    for _ in range(150):
        conditions = chosen.sample(pool, chosen.randint(2, 8))
        may_hold = any_may_hold([_parsed(c) for c in conditions])
        for i, arguments in enumerate(ARGUMENTS):
            if not may_hold(arguments):
                assert all(answers[c][i] for c in conditions), (conditions, arguments)
    same_form = [f"args.n > {n}" for n in (5, 9, 30)] + [f"args.s.startsWith('{p}')" for p in "xyz"]
    may_hold = any_may_hold([_parsed(c) for c in same_form])
    assert may_hold({"n": 6}) and may_hold({"s": "yes"}) and may_hold({"n": "6"})
    assert not may_hold({"n": 5, "s": "abc"}) and not may_hold({"n": 1, "s": "a"})


def test_two_inequalities_of_one_path_hold_for_every_value() -> None:
    may_hold = any_may_hold([_parsed("args.s != 'a'"), _parsed("args.s != 'b'")])
    assert may_hold({"s": "a"}) and may_hold({"s": "b"})
    assert not any_may_hold([_parsed("args.n != 3")])({"n": 3})


@pytest.mark.parametrize(
    "condition",
    [
        "args.n > 1.5", "args.n > 1u", "args.n > 0x10", "args.n > 1 || true",
        'args.s == "a\\"b"', "args.n > 10 // note",
        "args.n > 99999999999999999999", "size(args.s) > 1 ? true : false", "now.getHours() > 1",
        "principal.agent == 'x'", 'r"abc" == args.s', "(args.n > 1)", "args.n > \u0661",
        "args.s in ['a', 1]", "args.s in []", "args.s in ['a',]",
        # a guard is plain only before `&&`s: a `||` or `?:` at the top binds looser than it
        "has(args.a) && args.a > 1 || true", "has(args.a) && args.b ? false : true",
        "has(args.a) && args.b == 'x' // or anything", "has(args.a) && args.b == 'a\\'b'",
        "has(args.a) && args.b == '''x'''", "has(args.a) && (args.b)) || ((true)",
        "args.n > 1 && args.m > 2 || true", "args.n > 1 && now.getHours() > 1 ? true : false",
        "now.getHours() > 1 && principal.agent == 'x'", "!has(args.a) && size(args.s) * 2 > 1",
    ],
)  # fmt: skip
def test_anything_else_is_left_to_the_bindings(condition: str) -> None:
    assert plain_condition(condition) is None
