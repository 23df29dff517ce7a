"""On the host: turn a `python` source into a package directory a sandbox can import.

Nothing here imports the user's code. For a source we copy its module (a single `.py` file,
or a package directory) into `<cache>/python-sources/<name>-<digest>/conclave_source_<name>/
code`, write a manifest and an `__init__` that calls `tools.sources.source_loader` (the
runner imports it inside the sandbox, so the directory's layout, `MANIFEST`, `CODE_DIR` and
`DEPS_DIR`, is defined there), and, for backends that bind host directories (bwrap,
process), `pip install --target` its requirements into `deps` next to it. The digest hashes
the code, the requirements and this recipe, so an unchanged source is prepared once. Docker
gets its requirements from an image layer instead (`sandbox.images`), keyed by the same
digest.

`module = "name"` means `name.py` or the package `name/` beside the config file, or, when
neither exists there, a module the source's requirements provide.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from gateway.sources.shared import SourceUnavailable, pip_install
from tools.sources import CODE_DIR, DEPS_DIR, MANIFEST, PythonSource

RECIPE_VERSION = "2"  # 2: the manifest names the separator
PACKAGE_PREFIX = "conclave_source_"
# Top-level names the sandbox already imports: a user's module of the same name would shadow it.
RESERVED_MODULES = frozenset({"protocol", "tools", "sandbox", "gateway", "agents", "conclave"})
_STUB = "from tools.sources.source_loader import load_source\n\nload_source(__path__[0])\n"


@dataclass(frozen=True)
class PreparedSource:
    source: PythonSource
    module: str  # what the sandbox imports
    package_dir: Path  # conclave_source_<name>: a tool module the sandbox mounts by path
    digest: str
    requirements: tuple[str, ...]  # pip requirement strings (a requirements file's lines)


def python_module(source: PythonSource, base_dir: Path) -> tuple[str, Path | None]:
    """The module the sandbox imports and the host file or directory holding its code (None:
    the requirements provide it)."""
    if source.path is not None:
        path = (base_dir / source.path).resolve()
        if path.is_file() and path.suffix == ".py":
            return path.stem, path
        if path.is_dir() and (path / "__init__.py").is_file():
            return path.name, path
        raise SourceUnavailable(f"path {path} is neither a .py file nor a package directory")
    assert source.module is not None  # the config allows exactly one of module, path
    top = source.module.split(".")[0]
    for candidate in (base_dir / f"{top}.py", base_dir / top):
        if candidate.is_file() or (candidate / "__init__.py").is_file():
            return source.module, candidate.resolve()
    return source.module, None


def requirement_lines(source: PythonSource, base_dir: Path) -> tuple[str, ...]:
    if not isinstance(source.requirements, Path):
        return source.requirements
    path = base_dir / source.requirements
    try:
        text = path.read_text("utf-8")
    except OSError as exc:
        raise SourceUnavailable(f"cannot read requirements file {path} ({exc.strerror})") from exc
    lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return tuple(line for line in lines if line)


def prepare_python_source(
    source: PythonSource, base_dir: Path, cache_dir: Path, *, install_requirements: bool
) -> PreparedSource:
    """The source's package directory, built unless an identical one exists."""
    module, code = python_module(source, base_dir)
    top = module.split(".")[0]
    if top in RESERVED_MODULES or top.startswith(PACKAGE_PREFIX):
        raise SourceUnavailable(f"module name {top!r} is Conclave's own: rename the module")
    requirements = requirement_lines(source, base_dir)
    digest = _digest(
        f"{source.name}{source.separator}", module, code, requirements, install_requirements
    )
    root = cache_dir / "python-sources" / f"{source.name}-{digest}"
    package = root / (PACKAGE_PREFIX + source.name.replace("-", "_"))
    if not root.is_dir():
        _build(root, package, source, module, code, requirements, install_requirements)
    return PreparedSource(source, module, package, digest, requirements)


def _build(
    root: Path,
    package: Path,
    source: PythonSource,
    module: str,
    code: Path | None,
    requirements: tuple[str, ...],
    install: bool,
) -> None:
    partial = root.with_name(root.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    staged = partial / package.name
    (staged / CODE_DIR).mkdir(parents=True)
    if code is not None and code.is_file():
        shutil.copy2(code, staged / CODE_DIR / code.name)
    elif code is not None:
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
        shutil.copytree(code, staged / CODE_DIR / code.name, ignore=ignore)
    manifest = {"source": source.name, "module": module, "separator": source.separator}
    (staged / MANIFEST).write_text(json.dumps(manifest))
    (staged / "__init__.py").write_text(_STUB)
    if install and requirements:
        pip_install(requirements, staged / DEPS_DIR)
    partial.chmod(0o755)
    partial.rename(root)


def _digest(
    name: str, module: str, code: Path | None, requirements: tuple[str, ...], install: bool
) -> str:
    """A hash of everything the prepared directory is made of."""
    # Installed commands name their interpreter (#!): another interpreter, another directory.
    interpreter = sys.executable if install else ""
    recipe = [RECIPE_VERSION, name, module, requirements, install, interpreter]
    sha = hashlib.sha256(json.dumps(recipe).encode())
    if code is not None:
        files = [code] if code.is_file() else sorted(code.rglob("*"))
        for path in files:
            if path.is_file() and "__pycache__" not in path.parts:
                sha.update(str(path.relative_to(code.parent)).encode() + b"\0")
                sha.update(path.read_bytes())
    return sha.hexdigest()[:16]
