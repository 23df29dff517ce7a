"""Reading the gateway's Lua scripts, which ship as package data in each package's `lua/`.

`gateway.state` and `gateway.budgets` keep every Redis script as a `.lua` file whose header
lists its KEYS and ARGV. A script may be composed: shared Lua functions (one file each) come
first, then the body that calls them, so a function is written once however many scripts run
it. Callers hand the text to `redis.register_script` once per client, which runs it by
EVALSHA; the text is read from disk once per process, never per call.
"""

from __future__ import annotations

from functools import cache
from importlib import resources


@cache
def lua_text(package: str, *names: str) -> str:
    """The files `<package>/lua/<name>.lua` joined in the order given, as one script."""
    folder = resources.files(package).joinpath("lua")
    return "\n".join(folder.joinpath(f"{name}.lua").read_text("utf-8") for name in names)
