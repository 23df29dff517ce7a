"""On the host: an `mcp_stdio` source's runtime, a package directory a sandbox mounts.

The directory `<cache>/stdio-sources/<name>-<digest>/conclave_stdio_<name>` is a tool module
(an empty package the runner imports, so every backend mounts it read-only) holding what the
server's command needs: its `npm` packages installed on the host (`npm install --prefix`,
so `node_modules/.bin` has their commands) and, for backends that bind host directories
(bwrap, process), its `pypi` packages `pip install --target deps`. Docker gets the `pypi`
packages from an image layer instead (`sandbox.images.source_layer`), and Debian's node from
the host (`sandbox.images.source_layer.node_layer`). The digest hashes the packages and this
recipe, so an unchanged source is prepared once.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from gateway.sources.shared import SourceUnavailable, pip_install
from tools.sources import McpStdioSource

RECIPE_VERSION = "1"
PACKAGE_PREFIX = "conclave_stdio_"


@dataclass(frozen=True)
class PreparedStdioSource:
    source: McpStdioSource
    package_dir: Path  # conclave_stdio_<name>: a tool module the sandbox mounts by path
    digest: str

    @property
    def module(self) -> str:
        return self.package_dir.name


def prepare_stdio_source(
    source: McpStdioSource, cache_dir: Path, *, install_pypi: bool
) -> PreparedStdioSource:
    """The source's package directory, built unless an identical one exists."""
    # pip writes the interpreter's path into the commands it installs (their #! line): a
    # runtime prepared by another interpreter (another checkout's venv) is another runtime.
    interpreter = sys.executable if install_pypi else ""
    recipe = [RECIPE_VERSION, source.name, source.pypi, source.npm, install_pypi, interpreter]
    digest = hashlib.sha256(json.dumps(recipe).encode()).hexdigest()[:16]
    root = cache_dir / "stdio-sources" / f"{source.name}-{digest}"
    package = root / (PACKAGE_PREFIX + source.name.replace("-", "_"))
    if not root.is_dir():
        partial = root.with_name(root.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        staged = partial / package.name
        staged.mkdir(parents=True)
        (staged / "__init__.py").write_text(
            f'"""The runtime of mcp_stdio source {source.name}."""\n'
        )
        if install_pypi and source.pypi:
            pip_install(source.pypi, staged / "deps")
        if source.npm:
            _npm_install(source.npm, staged)
        partial.chmod(0o755)
        partial.rename(root)
    return PreparedStdioSource(source, package, digest)


def _npm_install(packages: tuple[str, ...], prefix: Path) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise SourceUnavailable("npm is missing on the host: apt-get install nodejs npm")
    argv = [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", *packages]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise SourceUnavailable(f"npm could not install {' '.join(packages)}: {last[0]}")
