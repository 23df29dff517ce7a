"""Which host files a sandbox needs (tool code, the runner folder) and the command that starts it.

Isolating backends mount the tool code read-only at `SANDBOX_CODE_DIR/<entry>`: the
`protocol` and `tools` packages plus the top-level package of every configured tool module
(a single-file module keeps its `.py`, or it could not be imported). A tool module may also
be an absolute path to a package directory (a prepared tool source): it is mounted under its
own name and imported by that name.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from sandbox.backend import SandboxStartError

REPO_ROOT = Path(__file__).resolve().parent.parent
# The runner's folder, mounted whole; `python <folder>` runs its `__main__`.
RUNNER_PATH = Path(__file__).resolve().with_name("runner")
BASE_PACKAGES = ("protocol", "tools")


def module_name(tool_module: str) -> str:
    """What the runner imports for a configured tool module (a name, or a package's path)."""
    return Path(tool_module).name if tool_module.startswith("/") else tool_module


def code_packages(tool_modules: tuple[str, ...]) -> dict[str, Path]:
    """Entry under SANDBOX_CODE_DIR (a package's name, a module's file name) -> its host path."""
    found: dict[str, Path] = {}
    for module in (*BASE_PACKAGES, *tool_modules):
        if module.startswith("/"):
            found[Path(module).name] = Path(module)
            continue
        top = module.split(".")[0]
        if top in found:
            continue
        spec = importlib.util.find_spec(top)
        if spec is None or spec.origin is None:
            raise SandboxStartError(
                f"tool module {module!r} is not importable on the host: install it, or remove "
                "it from CONCLAVE_TOOL_MODULES"
            )
        origin = Path(spec.origin).resolve()
        if origin.name == "__init__.py":
            found[top] = origin.parent
        else:
            found[origin.name] = origin
    return found


def runner_argv(
    python: str, runner: str, socket_path: str, workspace: str, tool_modules: tuple[str, ...]
) -> list[str]:
    argv = [python, "-B", runner, "--connect", socket_path, "--workspace", workspace]
    for module in tool_modules:
        argv += ["--module", module_name(module)]
    return argv
