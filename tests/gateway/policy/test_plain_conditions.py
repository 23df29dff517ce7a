"""Conditions found false in Python (`gateway.policy.plain_conditions`) against the CEL
bindings themselves: a check may answer False only where the bindings answer false, never
True, and it does answer for the plain cases it exists for."""

from __future__ import annotations

from typing import Any

import cel
import pytest

from gateway.policy.plain_conditions import plain_check

CONDITIONS = [
    "args.n > 10", "args.n >= -3", "args.n == 7", "args.n != 7", "args.n < 0", "args.n <= 5",
    "args . a.b > 1", "size(args.s) > 3", "size(args.s) <= 2", "size( args.l ) == 2",
    'args.s == "hi"', "args.s != 'hi'", 'args.s.startsWith("h")', "args.s.endsWith('i')",
    'args.s.contains("é")', 'has(args.o) && args.o == "3"', "has(args.a.b) && args.a.b > 1",
    "has(args.s) && size(args.s) > 2", "args.s in ['hi', \"ab\"]", 'args.s in [ "é" ]',
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


@pytest.mark.parametrize("condition", CONDITIONS)
def test_a_check_says_false_only_where_the_bindings_do(condition: str) -> None:
    check = plain_check(condition)
    assert check is not None, "a plain form was not recognised"
    said_false = 0
    for arguments in ARGUMENTS:
        answer = check(arguments)
        assert answer in (False, None), (arguments, answer)
        if answer is False:
            said_false += 1
            assert _bindings(condition, arguments) is False, arguments
    assert said_false >= 1  # it spares the bindings the plain cases


@pytest.mark.parametrize(
    "condition",
    [
        "args.n > 1.5", "args.n > 1u", "args.n > 0x10", "args.n > 1 || true",
        'args.s == "a\\"b"', "has(args.a) && args.a > 1 && true", "args.n > 10 // note",
        "args.n > 99999999999999999999", "size(args.s) > 1 ? true : false", "now.getHours() > 1",
        "principal.agent == 'x'", 'r"abc" == args.s', "(args.n > 1)", "args.n > \u0661",
        "args.s in ['a', 1]", "args.s in []", "args.s in ['a',]",
    ],
)  # fmt: skip
def test_anything_else_is_left_to_the_bindings(condition: str) -> None:
    assert plain_check(condition) is None
