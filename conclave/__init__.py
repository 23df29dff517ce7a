"""Composition root: the CLI, the embedded stack and the benchmark suites.

Its public names are loaded on first use (PEP 562), so `conclave.cli` (which every command
imports) does not pay for the stack, the gateway and Redis before a command needs them.
"""

from __future__ import annotations

import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:
    from conclave.stack import EmbeddedRedis, EmbeddedStack

_HOMES = {"EmbeddedRedis": "conclave.stack.embedded_redis", "EmbeddedStack": "conclave.stack"}

__all__ = ["EmbeddedRedis", "EmbeddedStack"]


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'conclave' has no attribute {name!r}")
    value = getattr(_importlib.import_module(home), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
