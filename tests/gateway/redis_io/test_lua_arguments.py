"""Each Lua script's arguments are declared once, in its `.lua` file's `--- KEYS:` and
`--- ARGV:` lines: the script reads them by those names only, and every Python caller passes
exactly those names (a name missing or extra is refused before Redis is asked)."""

from __future__ import annotations

import ast
import importlib
import re
from importlib import resources
from pathlib import Path

import pytest

from gateway.redis_io import LuaScript, ScriptArgumentsError, lua_script

ROOT = Path(__file__).parents[3]
# Every package of the gateway with Lua scripts of its own (a `lua/` folder beside its modules).
PACKAGES = tuple(
    sorted(
        ".".join(folder.parent.relative_to(ROOT).parts)
        for folder in (ROOT / "gateway").rglob("lua")
        if folder.is_dir() and any(folder.glob("*.lua"))
    )
)
DECLARED = re.compile(r"^--- (KEYS|ARGV): ", re.M)
BODIES = sorted(
    (package, entry.name.removesuffix(".lua"))
    for package in PACKAGES
    for entry in resources.files(package).joinpath("lua").iterdir()
    if entry.name.endswith(".lua") and DECLARED.search(entry.read_text("utf-8"))
)


def _callers() -> dict[tuple[str, str], list[tuple[str, frozenset[str], LuaScript]]]:
    """Per (module, script variable): each `.keys(...)`/`.argv(...)` call's side and names."""
    found: dict[tuple[str, str], list[tuple[str, frozenset[str], LuaScript]]] = {}
    for path in sorted((ROOT / "gateway").rglob("*.py")):
        module_name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        tree = ast.parse(path.read_text("utf-8"))
        calls = [
            node
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("keys", "argv")
            and isinstance(node.func.value, ast.Name)
        ]
        if not calls:
            continue
        module = importlib.import_module(module_name.removesuffix(".__init__"))
        for call in calls:
            assert isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name)
            variable = call.func.value.id
            script = getattr(module, variable, None)
            if not isinstance(script, LuaScript):
                continue
            assert all(k.arg is not None for k in call.keywords), f"{module_name}: **names"
            names = frozenset(str(k.arg) for k in call.keywords)
            found.setdefault((module_name, variable), []).append((call.func.attr, names, script))
    return found


@pytest.mark.parametrize(("package", "body"), BODIES)
def test_a_script_reads_its_arguments_by_their_declared_names_only(package: str, body: str) -> None:
    text = resources.files(package).joinpath("lua", f"{body}.lua").read_text("utf-8")
    code = "\n".join(line for line in text.splitlines() if not line.startswith("--"))
    assert not re.search(r"\b(KEYS|ARGV)\[", code), f"{body}.lua indexes KEYS or ARGV itself"


def test_every_caller_passes_exactly_the_names_its_script_declares() -> None:
    callers = _callers()
    used: set[str] = set()
    for (module, variable), calls in callers.items():
        for side, names, script in calls:
            declared = getattr(script, side).declared
            assert names == declared, (
                f"{module}: {variable}.{side}() passes {sorted(names)}, "
                f"{script.name}.lua declares {sorted(declared)}"
            )
        sides = {side for side, _, _ in calls}
        assert sides == {"keys", "argv"}, f"{module}: {variable} lays out only {sides}"
        used.add(calls[0][2].name)
    # Every script with declared arguments has a caller that lays them out by name.
    assert used == {body for _, body in BODIES}


def test_a_name_missing_or_extra_is_refused_before_redis_is_asked() -> None:
    release = lua_script("gateway.state", "release")
    assert release.keys(cfg="c", data="d") == ["c", "d"]
    with pytest.raises(ScriptArgumentsError, match=r"missing \['data'\], not declared \['key'\]"):
        release.keys(cfg="c", key="d")
    acquire = lua_script("gateway.state", "tenant_bytes", "acquire")
    assert acquire.keys(cfg="c", usage="u", data=["a", "b"]) == ["c", "u", "a", "b"]
    assert "local cfg, usage = KEYS[1], KEYS[2]\nlocal data = {unpack(KEYS, 3)}" in acquire.text
