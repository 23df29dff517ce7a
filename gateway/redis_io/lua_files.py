"""Reading the gateway's Lua scripts, which ship as package data in each package's `lua/`.

`gateway.state`, `gateway.budgets`, `gateway.identity`, `gateway.mcp_tasks` and
`gateway.http.mcp` keep every Redis script as a `.lua` file. A script may be composed:
shared Lua functions (one file each) come first, then the body that calls them, so a
function is written once however many scripts run it. Callers hand the text to
`redis.register_script` (or a `PooledScript`) once per client, which runs it by EVALSHA; the
text is read from disk once per process, never per call.

A body declares its arguments once, in two header lines, and both sides read them from there:

    --- KEYS: cfg, usage, data...
    --- ARGV: agent, ttl_ms, names...

The loader puts `local cfg, usage = KEYS[1], KEYS[2]` (and `local data = {unpack(KEYS, 3)}`
for a trailing `name...`, the rest of them) before the body, which uses the names only; the
Python caller passes the same names, `SCRIPT.keys(cfg=..., usage=..., data=[...])`, and any
name missing or extra is a `ScriptArgumentsError` naming it, before Redis is asked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

_DECLARATION = re.compile(r"^--- (KEYS|ARGV): (.*)$", re.M)
_NAME = re.compile(r"[a-z_][a-z0-9_]*")


class ScriptArgumentsError(TypeError):
    """A caller passed a script other names than its `.lua` file declares."""


@dataclass(frozen=True)
class ScriptArguments:
    """One side of a script's arguments (its KEYS or its ARGV): the names in their order, and
    the name of the variadic rest, if the declaration ends in `name...`."""

    script: str
    side: str
    names: tuple[str, ...] = ()
    rest: str | None = None
    _all: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        every = (*self.names, self.rest) if self.rest is not None else self.names
        object.__setattr__(self, "_all", frozenset(every))

    @property
    def declared(self) -> frozenset[str]:
        return self._all

    def __call__(self, **named: Any) -> list[Any]:
        """The values in the script's order (the rest, a sequence, last)."""
        if named.keys() != self._all:
            missing, extra = sorted(self._all - named.keys()), sorted(named.keys() - self._all)
            raise ScriptArgumentsError(
                f"{self.script}.lua {self.side}: missing {missing}, not declared {extra}; "
                f"the file declares {sorted(self._all)}"
            )
        values = [named[name] for name in self.names]
        if self.rest is not None:
            values.extend(named[self.rest])
        return values

    def preamble(self) -> str:
        """The Lua lines that name this side's arguments."""
        lines = []
        if self.names:
            indexed = ", ".join(f"{self.side}[{i}]" for i in range(1, len(self.names) + 1))
            lines.append(f"local {', '.join(self.names)} = {indexed}")
        if self.rest is not None:
            lines.append(f"local {self.rest} = {{unpack({self.side}, {len(self.names) + 1})}}")
        return "\n".join(lines)


@dataclass(frozen=True)
class LuaScript:
    """A composed script's text (the named arguments' preamble included) and its arguments."""

    name: str
    text: str
    keys: ScriptArguments
    argv: ScriptArguments


@cache
def lua_script(package: str, *names: str) -> LuaScript:
    """The files `<package>/lua/<name>.lua` joined in the order given, as one script; the last
    file is the body, whose `--- KEYS:` and `--- ARGV:` lines declare its arguments."""
    folder = resources.files(package).joinpath("lua")
    texts = [folder.joinpath(f"{name}.lua").read_text("utf-8") for name in names]
    body = names[-1]
    declared = dict(_DECLARATION.findall(texts[-1]))
    keys = _arguments(body, "KEYS", declared.get("KEYS"))
    argv = _arguments(body, "ARGV", declared.get("ARGV"))
    preamble = "\n".join(p for p in (keys.preamble(), argv.preamble()) if p)
    return LuaScript(body, "\n".join([*texts[:-1], preamble, texts[-1]]), keys, argv)


def lua_library(package: str, name: str) -> str:
    """A file of shared Lua functions, `<package>/lua/<name>.lua`, as it is (it declares no
    arguments: the body it is prepended to does), for a body in another package."""
    return resources.files(package).joinpath("lua", f"{name}.lua").read_text("utf-8")


def lua_text(package: str, *names: str) -> str:
    """The text of `lua_script(package, *names)`, ready to register."""
    return lua_script(package, *names).text


def _arguments(script: str, side: str, declaration: str | None) -> ScriptArguments:
    if declaration is None:
        raise ScriptArgumentsError(f"{script}.lua declares no '--- {side}:' line")
    if declaration.strip() in ("", "none"):
        return ScriptArguments(script, side)
    names = [name.strip() for name in declaration.split(",")]
    rest = names.pop()[:-3] if names[-1].endswith("...") else None
    for name in [*names, *([rest] if rest is not None else [])]:
        if not _NAME.fullmatch(name):
            raise ScriptArgumentsError(f"{script}.lua {side}: {name!r} is not a Lua name")
    return ScriptArguments(script, side, tuple(names), rest)
