"""The product's import graph, read with `ast`: no import circle, no CLI module imported by
anything but the CLI, and every import within the layers of docs/architecture.md's table.

An import counts when it runs as its module loads: at module level, in a class body, under a
module-level `if`/`try`; not in a function (a lazy import) nor under `if TYPE_CHECKING:`.
`from P import n` is an edge to `P.n` when that is a module, else to `P`. Loading `a.b.c` also
loads the packages `a` and `a.b`; those implicit edges are not counted, or every package whose
`__init__` lists its own modules' names would be a circle with each of them.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

PRODUCT = ("protocol", "tools", "sandbox", "gateway", "agents", "conclave")
ROOT = Path(__file__).resolve().parent.parent
CLI = "conclave.cli"
# `python -m conclave` runs the CLI: the one module outside the CLI package that may import it.
CLI_ENTRY = "conclave.__main__"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {
    _module_name(path): path for top in PRODUCT for path in sorted((ROOT / top).rglob("*.py"))
}


def _is_type_checking(test: ast.expr) -> bool:
    return "TYPE_CHECKING" in ast.unparse(test)


def _imports(tree: ast.AST, *, lazy: bool) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements of a module; with `lazy`, those in functions and under
    `TYPE_CHECKING` as well."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if lazy:
                yield from _imports(node, lazy=lazy)
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            if lazy:
                yield from _imports(node, lazy=lazy)
            for branch in node.orelse:  # the `else:` of `if TYPE_CHECKING` runs
                yield from _imports(ast.Module(body=[branch], type_ignores=[]), lazy=lazy)
        else:
            yield from _imports(node, lazy=lazy)


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    """The product modules an import statement loads, by name."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
            for _ in range(node.level - 1):
                package = package.rpartition(".")[0]
            base = f"{package}.{base}".rstrip(".")
        # `from P import m` of a module `m` loads `P.m` (and `P`, its parent, implicitly)
        submodules = [f"{base}.{alias.name}" for alias in node.names]
        names = [s for s in submodules if s in MODULES]
        if len(names) < len(submodules):
            names.append(base)
    yield from (name for name in names if name in MODULES)


def _graph(*, lazy: bool) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text("utf-8"))
        graph[module] = {
            target
            for node in _imports(tree, lazy=lazy)
            for target in _targets(module, node)
            if target != module
        }
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_the_graph_sees_the_imports_it_should() -> None:
    """The reader finds a known module-level import, and not a known lazy one."""
    graph = _graph(lazy=False)
    assert "conclave.bench.core.suite" in graph["conclave.bench.core.suite_runner"]
    assert "conclave.bench" not in graph["conclave.cli.app"]  # imported in `conclave bench`
    assert "conclave.bench" in _graph(lazy=True)["conclave.cli.app"]
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circle_among_the_product_modules() -> None:
    """None counting the imports inside functions and under TYPE_CHECKING too: a circle held
    open by a lazy import is still a circle of the design."""
    found = circles(_graph(lazy=True))
    listed = "\n".join(" <-> ".join(component) for component in found)
    assert found == [], f"{len(found)} import circle(s) among the product's modules:\n{listed}"


def test_only_the_cli_imports_a_cli_module() -> None:
    """A CLI module is an edge of the product: the bench, the stack or the gateway importing
    one (even lazily) would load typer and the commands, and turn the dependency around."""
    graph = _graph(lazy=True)
    offenders = sorted(
        f"{module} imports {target}"
        for module, targets in graph.items()
        if module != CLI_ENTRY and module != CLI and not module.startswith(f"{CLI}.")
        for target in targets
        if target == CLI or target.startswith(f"{CLI}.")
    )
    assert offenders == []


# What each part of conclave/ may not import, even lazily: the core of the bench knows no suite
# family (a suite's options reach it as `SuiteOptions`), the stack knows neither bench nor CLI.
FORBIDDEN = {
    "conclave.bench.core": ("conclave.bench.",),
    "conclave.stack": ("conclave.bench", "conclave.cli"),
}


def _within(module: str, part: str) -> bool:
    return module == part or module.startswith(f"{part}.")


def test_the_bench_core_and_the_stack_import_inward_only() -> None:
    graph = _graph(lazy=True)
    offenders = sorted(
        f"{module} imports {target}"
        for module, targets in graph.items()
        for part, forbidden in FORBIDDEN.items()
        if _within(module, part)
        for target in targets
        if target.startswith(forbidden) and not _within(target, part)
    )
    assert offenders == []


def _layers() -> dict[str, set[str]]:
    """docs/architecture.md's layer table: each package and the packages it may import."""
    text = (ROOT / "docs" / "architecture.md").read_text("utf-8")
    table = text.split("<!-- layers: read by tests/test_import_graph.py -->", 1)[1]
    layers: dict[str, set[str]] = {}
    for line in table.strip().splitlines()[2:]:
        if not line.startswith("|"):
            break
        package, _, may_import = (cell.strip() for cell in line.strip("|").split("|"))
        layers[package.strip("`")] = set(re.findall(r"`(\w+)`", may_import))
    return layers


def test_every_import_keeps_to_the_layers_of_the_architecture_page() -> None:
    layers = _layers()
    assert set(layers) == set(PRODUCT)  # the page names every package, and only those
    offenders = sorted(
        f"{module} imports {target}"
        for module, targets in _graph(lazy=True).items()
        for target in targets
        if (source := module.split(".")[0]) != (goal := target.split(".")[0])
        and goal not in layers[source]
    )
    assert offenders == [], "\n".join(offenders)
