"""Each package's public surface is its `__init__`'s `__all__`, and other packages use only that.

Modelled on httpx's `tests/test_exported_members.py` and pydantic's `tests/test_exports.py`:
every listed name exists, nothing public is left unlisted, and product code reaches another
package only through a package's `__all__`. Tool modules (`tools.harness.*`, named in
`CONCLAVE_TOOL_MODULES`) are the one exception: they are addressed by module path, and
importing one registers its tools, so no package `__init__` may re-export them.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path
from types import ModuleType

import pytest

PRODUCT = ("protocol", "tools", "sandbox", "gateway", "agents", "conclave")
ROOT = Path(__file__).resolve().parent.parent
TOOL_MODULES = "tools.harness."


def _packages() -> list[str]:
    found: list[str] = []
    for top in PRODUCT:
        found.append(top)
        module = importlib.import_module(top)
        for info in pkgutil.walk_packages(module.__path__, prefix=f"{top}."):
            if info.ispkg and not info.name.startswith(TOOL_MODULES.rstrip(".")):
                found.append(info.name)
    return found


PACKAGES = _packages()


def _exports(name: str) -> list[str]:
    exported: list[str] = getattr(importlib.import_module(name), "__all__", [])
    return exported


@pytest.mark.parametrize("package", PACKAGES)
def test_every_listed_name_exists_once(package: str) -> None:
    module = importlib.import_module(package)
    names = _exports(package)
    assert len(names) == len(set(names)), f"{package}.__all__ lists a name twice"
    missing = [name for name in names if not hasattr(module, name)]
    assert not missing, f"{package}.__all__ lists names it does not define: {missing}"


@pytest.mark.parametrize("package", [p for p in PACKAGES if _exports(p)])
def test_nothing_public_is_left_unlisted(package: str) -> None:
    module = importlib.import_module(package)
    listed = set(_exports(package))
    unlisted = [
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and name not in listed
        and name != "annotations"  # from __future__ import annotations
        and not (isinstance(value, ModuleType) and value.__name__.startswith(f"{package}."))
    ]
    assert not unlisted, f"{package} has public names outside __all__: {unlisted}"


def _is_package(module: str) -> bool:
    return (ROOT / module.replace(".", "/") / "__init__.py").exists()


def _exempt(path: Path, module: str) -> bool:
    """Tool modules are addressed by path; the sandbox imports a backend's module only where
    that backend is chosen (it touches the host: cgroups, the Docker engine)."""
    inside_sandbox = path.is_relative_to(ROOT / "sandbox")
    return module.startswith(TOOL_MODULES) or (
        inside_sandbox and module.startswith("sandbox.backends.")
    )


def test_product_code_imports_other_packages_through_their_public_names() -> None:
    """Outside a package (a top-level one, or a subpackage such as `gateway.budgets`), code
    imports it only through the names its `__init__` lists."""
    bypasses: list[str] = []
    for top in PRODUCT:
        for path in sorted((ROOT / top).rglob("*.py")):
            tree = ast.parse(path.read_text("utf-8"))
            for node in ast.walk(tree):
                if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                    continue
                module = node.module
                if module.split(".")[0] not in PRODUCT or _exempt(path, module):
                    continue
                home = module if _is_package(module) else module.rsplit(".", 1)[0]
                if path.is_relative_to(ROOT / home.replace(".", "/")):
                    continue  # inside the package: its private modules are its own
                names = [alias.name for alias in node.names]
                public = set(_exports(module)) if _is_package(module) else set()
                if not set(names) <= public:
                    where = f"{path.relative_to(ROOT)}:{node.lineno}"
                    bypasses.append(f"{where}: from {module} import {', '.join(names)}")
    assert not bypasses, "imports that bypass a package's __all__:\n" + "\n".join(bypasses)
