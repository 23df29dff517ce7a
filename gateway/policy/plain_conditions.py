"""Conditions simple enough to be found false in Python, without crossing into CEL.

On a serving gateway each crossing into the CEL bindings costs about 10 us (its code and data
are no longer in the CPU's caches by the next call; docs/governance.md), most of what a rule
set costs a call. A condition of one of these forms over the call's arguments:

    args.PATH OP INT                  (OP: == != < <= > >=; INT: decimal, fits int64)
    size(args.PATH) OP INT
    args.PATH == "TEXT", args.PATH != "TEXT"
    args.PATH.startsWith("TEXT"), .endsWith("TEXT"), .contains("TEXT")
    args.PATH in ["TEXT", ...]
    has(args.PATH) && one of the above

(PATH: names joined by dots; TEXT: in single or double quotes, with no backslash) is compiled
here to a check that answers False when the condition is surely false for a call, and None
when it cannot tell: a value of another type, an integer past int64, a string's size when it
is not ASCII (the bindings count its UTF-8 bytes), a key that is missing. Then the bindings
decide, as they do for every other condition. A check never answers True: a rule that holds
is always named by the bindings, and a check can only spare them a false condition. The
differential test (tests/gateway/policy) holds each form to the bindings' answers.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping
from typing import Any

Check = Callable[[Mapping[str, Any]], "bool | None"]  # False: surely false; None: ask CEL

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_PATH = rf"args((?:\s*\.\s*{_NAME})+)"
_INT = r"-?[0-9]{1,18}"  # ASCII digits: a regex digit class takes any script's
_TEXT = r"\"([^\"\\\n]*)\"|'([^'\\\n]*)'"
_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt,
    "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}  # fmt: skip
_OP = r"==|!=|<=|>=|<|>"
_COMPARE = re.compile(rf"\s*{_PATH}\s*({_OP})\s*({_INT})\s*")
_SIZE = re.compile(rf"\s*size\s*\(\s*{_PATH}\s*\)\s*({_OP})\s*({_INT})\s*")
_EQUALS_TEXT = re.compile(rf"\s*{_PATH}\s*(==|!=)\s*(?:{_TEXT})\s*")
_METHOD = re.compile(
    rf"\s*{_PATH}\s*\.\s*(startsWith|endsWith|contains)\s*\(\s*(?:{_TEXT})\s*\)\s*"
)
_TEXTS = re.compile(rf"\s*{_PATH}\s+in\s*\[\s*((?:{_TEXT})(?:\s*,\s*(?:{_TEXT}))*)\s*\]\s*")
_HAS = re.compile(rf"\s*has\s*\(\s*{_PATH}\s*\)\s*&&(.*)", re.S)
_STRING_METHODS: dict[str, Callable[[str, str], bool]] = {
    "startsWith": str.startswith, "endsWith": str.endswith, "contains": operator.contains,
}  # fmt: skip
_MISSING = object()


def plain_check(condition: str) -> Check | None:
    """The check for `condition` when it has one of the forms above, else None."""
    found = _HAS.fullmatch(condition)
    if found is not None:
        inner = _plain(found.group(2))
        return None if inner is None else _when_present(_path(found.group(1)), inner)
    return _plain(condition)


def _plain(condition: str) -> Check | None:
    if found := _COMPARE.fullmatch(condition):
        return _compare(_path(found.group(1)), _OPS[found.group(2)], int(found.group(3)))
    if found := _SIZE.fullmatch(condition):
        return _size(_path(found.group(1)), _OPS[found.group(2)], int(found.group(3)))
    if found := _EQUALS_TEXT.fullmatch(condition):
        text = found.group(3) if found.group(3) is not None else found.group(4)
        return _text(_path(found.group(1)), _OPS[found.group(2)], text)
    if found := _TEXTS.fullmatch(condition):
        listed = frozenset(a or b for a, b in re.findall(_TEXT, found.group(2)))
        return _text(_path(found.group(1)), _among, listed)
    if found := _METHOD.fullmatch(condition):
        text = found.group(3) if found.group(3) is not None else found.group(4)
        return _text(_path(found.group(1)), _STRING_METHODS[found.group(2)], text)
    return None


def _path(dotted: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in dotted.split(".")[1:])


def _getter(path: tuple[str, ...]) -> Callable[[Mapping[str, Any]], Any]:
    """The value at `path` in the call's arguments (a dict), or _MISSING when a step is not a
    dict holding the next name. One name, the common case, is one `dict.get`."""
    if len(path) == 1:
        name = path[0]
        return lambda arguments: arguments.get(name, _MISSING)

    def value_at(arguments: Mapping[str, Any]) -> Any:
        value: Any = arguments
        for name in path:
            if type(value) is not dict or name not in value:
                return _MISSING
            value = value[name]
        return value

    return value_at


def _compare(path: tuple[str, ...], op: Callable[[Any, Any], bool], bound: int) -> Check:
    value_at = _getter(path)

    def check(arguments: Mapping[str, Any]) -> bool | None:
        value = value_at(arguments)
        # bool, float, past int64, missing: the bindings' rules differ, they decide
        if type(value) is int and -(2**63) <= value < 2**63 and not op(value, bound):
            return False
        return None

    return check


def _size(path: tuple[str, ...], op: Callable[[Any, Any], bool], bound: int) -> Check:
    value_at = _getter(path)

    def check(arguments: Mapping[str, Any]) -> bool | None:
        value = value_at(arguments)
        sized = (type(value) is str and value.isascii()) or type(value) in (list, dict)
        return False if sized and not op(len(value), bound) else None

    return check


def _among(value: str, listed: frozenset[str]) -> bool:
    return value in listed


def _text(path: tuple[str, ...], test: Callable[[Any, Any], bool], text: Any) -> Check:
    value_at = _getter(path)

    def check(arguments: Mapping[str, Any]) -> bool | None:
        value = value_at(arguments)
        return False if type(value) is str and not test(value, text) else None

    return check


def _when_present(path: tuple[str, ...], inner: Check) -> Check:
    """`has(args.PATH) && inner`: false when PATH's last name is missing from a dict."""
    parent, last = path[:-1], path[-1]
    holder_at = _getter(parent) if parent else (lambda arguments: arguments)

    def check(arguments: Mapping[str, Any]) -> bool | None:
        holder = holder_at(arguments)
        if type(holder) is not dict:
            return None
        return False if last not in holder else inner(arguments)

    return check
