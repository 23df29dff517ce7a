"""A sandbox's start (issue 43), on every backend: the runner is up on the standard library
alone, its tool modules are imported after its hello, and the first call of a new identity
carries its start's stages (what its trace shows). With the built-in tools, the runner's whole
way to its first answer imports nothing outside the standard library.

Before: the runner imported its tool modules (pydantic with them) before it said hello, so a
start's cost was one opaque wait, and its first call said nothing of where that wait went.
Until session 21, importing `tools.builtin` loaded pydantic, `protocol`'s models and
`typing_extensions` (about 210 ms of a start's CPU on the shared 2-core machine).
"""

from __future__ import annotations

import pytest

from tests.sandbox.conftest import ALL_BACKENDS, PoolFactory, invocation

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("backend", ALL_BACKENDS)]

LAUNCH = {"docker": ["engine create", "engine start"], "bwrap": ["spawn"], "process": ["spawn"]}


async def test_a_runner_start_imports_nothing_beyond_the_standard_library(
    backend: str, make_pool: PoolFactory
) -> None:
    pool = await make_pool(backend)
    outcome = await pool.execute(invocation("echo", {"message": "hi"}, module="tools.builtin"))
    assert outcome.ok and outcome.result == "hi"
    (sandbox,) = [s for sandboxes in pool._idle.values() for s in sandboxes]
    # Checked in the sandbox, by its own interpreter (`sys.stdlib_module_names`).
    assert sandbox.hello["imported"] == [], sandbox.hello
    # The tool modules came after the hello, and were imported all the same.
    assert {"echo", "whoami"} <= set(sandbox.hello["tools"])
    assert sandbox.hello["import_errors"] == {}


async def test_a_runner_start_imports_no_module_outside_the_standard_library(
    backend: str, make_pool: PoolFactory
) -> None:
    # The gateway's default tool modules: the built-in tools.
    pool = await make_pool(backend, tool_modules=("tools.builtin",))
    # The first call's child inherits the runner's modules: what it lists is what the runner
    # imported on its way to ready and this call, as the sandbox's own interpreter sees it,
    # less what that interpreter loads before any code runs (`site`: .pth files and
    # sitecustomize, which differ by machine and image).
    listing = (
        "import subprocess, sys\n"
        "bare = subprocess.run([sys.executable, '-B', '-c', 'import sys; print(*sys.modules)'],"
        " capture_output=True, text=True, check=True).stdout.split()\n"
        "tops = lambda names: {name.partition('.')[0] for name in names}\n"
        "sorted(tops(sys.modules) - tops(bare) - sys.stdlib_module_names)"
    )
    outcome = await pool.execute(
        invocation("run_python", {"code": listing}, module="tools.builtin")
    )
    assert outcome.ok, outcome.error
    assert set(outcome.result["return_value"]) <= {"runner", "sandbox", "tools"}, outcome.result
    (sandbox,) = [s for sandboxes in pool._idle.values() for s in sandboxes]
    assert sandbox.hello["imported"] == [] and sandbox.hello["tool_imports"] == []
    assert {"echo", "run_python"} <= set(sandbox.hello["tools"])


async def test_a_new_identitys_first_call_carries_its_starts_stages(
    backend: str, make_pool: PoolFactory
) -> None:
    pool = await make_pool(backend)
    first = await pool.execute(invocation("echo", {"message": "hi"}, module="tools.builtin"))
    assert first.ok, first.error
    names = [stage.name for stage in first.start_stages]
    assert names == [*LAUNCH[backend], "runner start", "tool import"]
    for stage, after in zip(first.start_stages, first.start_stages[1:], strict=False):
        assert stage.start_ns <= stage.end_ns <= after.start_ns + 1  # one after the other
    started_ms = (first.start_stages[-1].end_ns - first.start_stages[0].start_ns) / 1e6
    assert first.waited_ms is not None and started_ms <= first.waited_ms + 1
    warm = await pool.execute(invocation("echo", {"message": "again"}, module="tools.builtin"))
    assert warm.ok and warm.start_stages == ()  # a warm call waited for no start
