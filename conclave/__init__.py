"""Composition root: the CLI, the embedded stack and the benchmark suites.

Its public names are loaded on first use (PEP 562), so `conclave.cli` (which every command
imports) does not pay for the stack, the gateway and Redis before a command needs them.
"""

from __future__ import annotations

import typing as _typing

from protocol import lazy_exports as _lazy_exports

if _typing.TYPE_CHECKING:
    from conclave.stack import EmbeddedRedis, EmbeddedStack

_HOMES = {"EmbeddedRedis": "conclave.stack.embedded_redis", "EmbeddedStack": "conclave.stack"}

__all__ = ["EmbeddedRedis", "EmbeddedStack"]

__getattr__, __dir__ = _lazy_exports(__name__, _HOMES)
