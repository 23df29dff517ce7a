"""`lazy_exports`: a package's public names loaded on first use (PEP 562).

A package whose names would pull in heavy modules (the gateway's app, Redis, the sandbox)
lists where each name lives and lets this build its module `__getattr__` and `__dir__`, so
importing the package, or one light name of it, does not load the rest. Standard library
only: the CLI imports it on every command.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping


def lazy_exports(
    package: str, homes: Mapping[str, str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of `package`, whose names `homes` maps to the module
    that defines each: `__getattr__, __dir__ = lazy_exports(__name__, _HOMES)`."""

    def __getattr__(name: str) -> object:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        setattr(sys.modules[package], name, value)  # looked up once
        return value

    def __dir__() -> list[str]:
        return sorted(homes)

    return __getattr__, __dir__
