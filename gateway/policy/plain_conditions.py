"""Conditions simple enough to be found false in Python, without crossing into CEL.

On a serving gateway each crossing into the CEL bindings costs about 10 us (its code and data
are no longer in the CPU's caches by the next call; docs/governance.md), most of what a rule
set costs a call. A condition of one of these forms over the call's arguments:

    args.PATH OP INT                  (OP: == != < <= > >=; INT: decimal, fits int64)
    size(args.PATH) OP INT
    args.PATH == "TEXT", args.PATH != "TEXT"
    args.PATH.startsWith("TEXT"), .endsWith("TEXT"), .contains("TEXT")
    args.PATH in ["TEXT", ...]
    has(args.PATH)
    A && B && ...                     (a chain of `&&` with one of the above among its parts)

(PATH: names joined by dots; TEXT: in single or double quotes, with no backslash) is parsed
here to a `PlainCondition`, which `plain_checks` turns into checks that answer False when the
condition is surely false for a call, and leave it to the bindings when they cannot tell: a
value of another type, an integer past int64, a string's size when it is not ASCII (the
bindings count its UTF-8 bytes), a key that is missing. A check never answers True: a rule that
holds is always named by the bindings, and a check can only spare them a false condition. The
differential test (tests/gateway/policy) holds each form to the bindings' answers.

A chain of `&&` is false whenever one of its parts is, whatever the others are: CEL's `&&` is
false when either side is, even when the other is an error. That holds only when the chain is
the condition's top level (a `||` or a `?:` there would bind looser), which `_conjuncts`
checks, giving up on anything it does not read (a comment, a triple-quoted or escaped string).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_PATH = rf"args((?:\s*\.\s*{_NAME})+)"
_INT = r"-?[0-9]{1,18}"  # ASCII digits: a regex digit class takes any script's
_TEXT = r"\"([^\"\\\n]*)\"|'([^'\\\n]*)'"
_OP = r"==|!=|<=|>=|<|>"
_COMPARE = re.compile(rf"\s*{_PATH}\s*({_OP})\s*({_INT})\s*")
_SIZE = re.compile(rf"\s*size\s*\(\s*{_PATH}\s*\)\s*({_OP})\s*({_INT})\s*")
_EQUALS_TEXT = re.compile(rf"\s*{_PATH}\s*(==|!=)\s*(?:{_TEXT})\s*")
_METHOD = re.compile(
    rf"\s*{_PATH}\s*\.\s*(startsWith|endsWith|contains)\s*\(\s*(?:{_TEXT})\s*\)\s*"
)
_TEXTS = re.compile(rf"\s*{_PATH}\s+in\s*\[\s*((?:{_TEXT})(?:\s*,\s*(?:{_TEXT}))*)\s*\]\s*")
_HAS_ALONE = re.compile(rf"\s*has\s*\(\s*{_PATH}\s*\)\s*")

Path = tuple[str, ...]  # the names after `args.`


@dataclass(frozen=True)
class PlainTest:
    """`form` of the value at `path`: compare, size (each with `op` and an int), text (`op`
    == or != and a str), among (a frozenset of str), startsWith, endsWith, contains (a str)."""

    path: Path
    form: str
    op: str
    operand: int | str | frozenset[str]


@dataclass(frozen=True)
class PlainCondition:
    """A plain condition: `test`, when `guard` (has(args.GUARD) && ...) is absent or there.
    `test` None: the guard is all that is plain (the rest is for the bindings)."""

    test: PlainTest | None
    guard: Path | None = None


def plain_condition(condition: str) -> PlainCondition | None:
    """`condition` parsed when it has one of the forms above, else None. A chain of `&&` is
    false whenever one of its parts is (CEL's `&&` is, even beside an error), so one whose
    parts include a `has(args.X)` or a plain form is parsed to those (the first of each)."""
    parts = _conjuncts(condition)
    if parts is None:
        return None
    guard: Path | None = None
    test: PlainTest | None = None
    for part in parts:
        found = _HAS_ALONE.fullmatch(part)
        if found is not None and guard is None:
            guard = _path(found.group(1))
        elif test is None:
            test = _plain(part)
    if guard is None and test is None:
        return None
    return PlainCondition(test, guard)


def _plain(condition: str) -> PlainTest | None:
    if found := _COMPARE.fullmatch(condition):
        return PlainTest(_path(found.group(1)), "compare", found.group(2), int(found.group(3)))
    if found := _SIZE.fullmatch(condition):
        return PlainTest(_path(found.group(1)), "size", found.group(2), int(found.group(3)))
    if found := _EQUALS_TEXT.fullmatch(condition):
        text = found.group(3) if found.group(3) is not None else found.group(4)
        return PlainTest(_path(found.group(1)), "text", found.group(2), text)
    if found := _TEXTS.fullmatch(condition):
        listed = frozenset(a or b for a, b in re.findall(_TEXT, found.group(2)))
        return PlainTest(_path(found.group(1)), "among", "", listed)
    if found := _METHOD.fullmatch(condition):
        text = found.group(3) if found.group(3) is not None else found.group(4)
        return PlainTest(_path(found.group(1)), found.group(2), "", text)
    return None


def _path(dotted: str) -> Path:
    return tuple(name.strip() for name in dotted.split(".")[1:])


def _conjuncts(condition: str) -> list[str] | None:
    """The parts of `condition` between its top-level `&&`s (itself, when it has none); None
    when it has a `||` or `?` outside brackets and strings (the `&&`s are then not its top
    level), or what this does not read: a comment, a triple-quoted string, a backslash or a
    line break in a string."""
    depth, i, start, parts = 0, 0, 0, []
    while i < len(condition):
        char = condition[i]
        if char in "'\"":
            end = condition.find(char, i + 1)
            text = condition[i:end]
            if condition.startswith(char * 3, i) or end < 0 or "\\" in text or "\n" in text:
                return None
            i = end + 1
            continue
        if condition.startswith("//", i):
            return None
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth < 0:
                return None
        elif depth == 0 and (char == "?" or condition.startswith("||", i)):
            return None
        elif depth == 0 and condition.startswith("&&", i):
            parts.append(condition[start:i])
            start = i + 2
            i += 1
        i += 1
    return [*parts, condition[start:]] if depth == 0 else None
