"""Which host files a sandbox needs (tool code, the runner) and the command that starts it.

Isolating backends mount the tool code read-only at `SANDBOX_CODE_DIR/<package>`: the
`protocol` and `tools` packages plus the top-level package of every configured tool module.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from sandbox.backend import SandboxStartError

REPO_ROOT = Path(__file__).resolve().parent.parent
RUNNER_PATH = Path(__file__).resolve().with_name("runner.py")
BASE_PACKAGES = ("protocol", "tools")


def code_packages(tool_modules: tuple[str, ...]) -> dict[str, Path]:
    """Top-level package name -> its directory (or module file) on the host."""
    found: dict[str, Path] = {}
    for module in (*BASE_PACKAGES, *tool_modules):
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
        found[top] = origin.parent if origin.name == "__init__.py" else origin
    return found


def runner_argv(
    python: str, runner: str, socket_path: str, workspace: str, tool_modules: tuple[str, ...]
) -> list[str]:
    argv = [python, "-B", runner, "--connect", socket_path, "--workspace", workspace]
    for module in tool_modules:
        argv += ["--module", module]
    return argv
