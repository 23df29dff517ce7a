"""The built-in tools. They run inside the sandbox, in a child the runner forked per call.

Standard library only (their intents are `ResourceIntent`'s fields, their results
dataclasses): the sandbox's runner imports this module on its way to ready.
"""

from __future__ import annotations

import ast
import contextlib
import io
import os
import subprocess
from dataclasses import dataclass
from typing import Any

from tools.tool_declaration import tool

WORKSPACE_ENV = "CONCLAVE_WORKSPACE"


def workspace() -> str:
    """The sandbox's workspace, symbolic links resolved: the only place file tools may touch."""
    return os.path.realpath(os.environ.get(WORKSPACE_ENV, os.getcwd()))


def _inside_workspace(path: str) -> str:
    """`path` (relative to the workspace) resolved, links and `..` followed, if it stays
    inside the workspace. `os.path` rather than pathlib: pathlib (and the urllib.parse it
    imports) would be a tenth of the runner's start."""
    root = workspace()
    target = os.path.realpath(os.path.join(root, path))
    if target != root and not target.startswith(root.rstrip(os.sep) + os.sep):
        raise PermissionError(f"{path!r} is outside the workspace; use a path relative to it")
    return target


@tool(
    idempotent=True,
    read_only=True,
    cheap=True,
    intent={"memory_mb": 64, "cpu_seconds": 1, "timeout_ms": 2_000},
)
def echo(message: str) -> str:
    """Return the message unchanged (the reference tool for measuring overhead)."""
    return message


@dataclass(frozen=True)
class PythonRun:
    """What `run_python` returns (its output schema)."""

    stdout: str
    stderr: str
    return_value: Any


@dataclass(frozen=True)
class ShellRun:
    """What `run_shell` returns (its output schema)."""

    stdout: str
    stderr: str
    exit_code: int


@tool(intent={"memory_mb": 256, "cpu_seconds": 10, "timeout_ms": 30_000})
def run_python(code: str) -> PythonRun:
    """Run Python code; returns stdout, stderr and the value of the last expression, if any."""
    tree = ast.parse(code, mode="exec")
    last: ast.expr | None = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = tree.body[-1].value
        tree.body.pop()
    scope: dict[str, Any] = {"__name__": "__main__"}
    out, err = io.StringIO(), io.StringIO()
    value: Any = None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        exec(compile(tree, "<run_python>", "exec"), scope)
        if last is not None:
            value = eval(compile(ast.Expression(last), "<run_python>", "eval"), scope)
    return PythonRun(out.getvalue(), err.getvalue(), _jsonable(value))


@tool(intent={"memory_mb": 256, "cpu_seconds": 10, "timeout_ms": 30_000})
def run_shell(command: str) -> ShellRun:
    """Run a shell command in the workspace; returns stdout, stderr and the exit code."""
    done = subprocess.run(
        command, shell=True, capture_output=True, text=True, cwd=workspace(), check=False
    )
    return ShellRun(done.stdout, done.stderr, done.returncode)


@tool(
    idempotent=True,
    read_only=True,
    intent={"memory_mb": 128, "cpu_seconds": 2, "timeout_ms": 5_000},
)
def read_file(path: str) -> str:
    """Read a text file from the sandbox workspace."""
    with open(_inside_workspace(path)) as text:
        return text.read()


@tool(intent={"memory_mb": 128, "cpu_seconds": 2, "timeout_ms": 5_000})
def write_file(path: str, content: str) -> int:
    """Write a text file in the sandbox workspace; returns the number of characters written."""
    target = _inside_workspace(path)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, "w") as text:
        return text.write(content)


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return repr(value)
