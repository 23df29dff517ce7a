"""A sandbox's start (issue 43), on every backend: the runner is up on the standard library
alone, its tool modules are imported after its hello, and the first call of a new identity
carries its start's stages (what its trace shows).

Before: the runner imported its tool modules (pydantic with them) before it said hello, so a
start's cost was one opaque wait, and its first call said nothing of where that wait went.
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
