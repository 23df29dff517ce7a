"""`CONCLAVE_SANDBOX_CPUS`: every sandbox on the CPUs the operator left to tool code (issue 26).

Keeping one core free of tool code for the gateway, Redis and the engine is what the setting
is for; tool code must not be able to take that core back, so the bound is the sandbox's
cgroup (cpuset), not an affinity mask the tool could widen.
"""

from __future__ import annotations

import os

import pytest
from pydantic import ValidationError

from sandbox.sandbox_config import SandboxConfig
from tests.sandbox.conftest import ISOLATING, PoolFactory, invocation

pytestmark = pytest.mark.anyio

# Tool code asks for every CPU of the machine, then says which it may run on.
_WIDEN_AND_LOOK = """
import os
try:
    os.sched_setaffinity(0, range(os.cpu_count()))
except OSError:
    pass
sorted(os.sched_getaffinity(0))
"""


@pytest.mark.parametrize("backend_name", ISOLATING)
async def test_tool_code_runs_only_on_the_sandboxes_cpus_and_cannot_widen_them(
    backend_name: str, make_pool: PoolFactory
) -> None:
    here = sorted(os.sched_getaffinity(0))
    last = here[-1]
    pool = await make_pool(backend_name, cpus=str(last))
    outcome = await pool.execute(
        invocation("run_python", {"code": _WIDEN_AND_LOOK}, module="tools.builtin")
    )
    assert outcome.ok, outcome.error
    assert outcome.result["return_value"] == [last]
    unbound = await make_pool(backend_name)
    outcome = await unbound.execute(
        invocation("run_python", {"code": _WIDEN_AND_LOOK}, module="tools.builtin", agent="bob")
    )
    assert outcome.result["return_value"] == here


@pytest.mark.parametrize(
    ("cpus", "said"),
    [
        ("9999", "this machine's CPUs are"),
        ("1-x", "not a CPU list"),
        ("3-1", "not a CPU list"),
    ],
)
def test_cpus_not_on_this_machine_or_malformed_are_refused_with_what_is_here(
    cpus: str, said: str
) -> None:
    with pytest.raises(ValidationError, match=said):
        SandboxConfig(cpus=cpus)


def test_the_inprocess_backend_refuses_a_cpu_set() -> None:
    with pytest.raises(ValidationError, match="inprocess backend"):
        SandboxConfig(cpus="0", backend="inprocess")
