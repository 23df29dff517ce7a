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
    has(args.PATH) && REST            (REST: any condition whose top level is `&&`s only)

(PATH: names joined by dots; TEXT: in single or double quotes, with no backslash) is parsed
here to a `PlainCondition`, which `plain_checks` turns into checks that answer False when the
condition is surely false for a call, and leave it to the bindings when they cannot tell: a
value of another type, an integer past int64, a string's size when it is not ASCII (the
bindings count its UTF-8 bytes), a key that is missing. A check never answers True: a rule that
holds is always named by the bindings, and a check can only spare them a false condition. The
differential test (tests/gateway/policy) holds each form to the bindings' answers.

`has(args.PATH) && REST` is false whenever PATH's last name is missing from its (map) holder,
whatever REST is: CEL's `&&` is false when either side is, even when the other is an error.
That holds only when the condition is a chain of `&&` (a `||` or a `?:` at its top level would
bind looser than the guard), which `_and_chain` checks, giving up on anything it does not read
(a comment, a triple-quoted or escaped string).
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
_HAS = re.compile(rf"\s*has\s*\(\s*{_PATH}\s*\)\s*&&(.*)", re.S)

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
    """`condition` parsed when it has one of the forms above, else None."""
    found = _HAS.fullmatch(condition)
    if found is not None:
        guard, rest = _path(found.group(1)), found.group(2)
        if not _and_chain(rest):
            return None
        return PlainCondition(_plain(rest), guard)
    test = _plain(condition)
    return None if test is None else PlainCondition(test)


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


def _and_chain(rest: str) -> bool:
    """Whether `rest` (what follows `has(...) &&`) has no `||` nor `?` outside brackets and
    strings, so the whole condition is `&&`s at its top level; False too for what this does
    not read: a comment, a triple-quoted string, a backslash or a line break in a string."""
    depth, i = 0, 0
    while i < len(rest):
        char = rest[i]
        if char in "'\"":
            end = rest.find(char, i + 1)
            if rest.startswith(char * 3, i) or end < 0 or any(c in rest[i:end] for c in "\\\n"):
                return False
            i = end + 1
            continue
        if rest.startswith("//", i):
            return False
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth < 0:
                return False
        elif depth == 0 and (char == "?" or rest.startswith("||", i)):
            return False
        i += 1
    return depth == 0
