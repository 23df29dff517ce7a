"""Every live sandbox runs under a host uid of its own (issue 43), on every backend, and a uid
goes to a new sandbox only once no process of the sandbox that had it is left."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from sandbox.pool.sandbox_uids import FIRST_SANDBOX_UID, SandboxUids
from tests.sandbox.conftest import (
    ALL_BACKENDS,
    PoolFactory,
    invocation,
    processes_named,
    unique_name,
)
from tools.calls import Invocation

pytestmark = pytest.mark.anyio


def test_two_gateways_on_one_host_never_hold_the_same_uid(tmp_path: Path) -> None:
    mine, another = SandboxUids(lock_dir=tmp_path), SandboxUids(lock_dir=tmp_path)
    first, second = mine.claim(), another.claim()
    assert (first, second) == (FIRST_SANDBOX_UID, FIRST_SANDBOX_UID + 1)
    assert mine.claim() == FIRST_SANDBOX_UID + 2
    mine.release(first)
    assert another.claim() == first  # the lowest free one: lock files stay few


def _shell(command: str, agent: str) -> Invocation:
    return invocation("run_shell", {"command": command}, agent=agent, module="tools.builtin")


def _uid_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise AssertionError(f"no uid for {pid}")


@pytest.mark.parametrize("backend", ALL_BACKENDS)
async def test_each_live_sandbox_has_its_own_uid_and_no_process_outlives_it(
    backend: str, make_pool: PoolFactory
) -> None:
    if os.geteuid() != 0:
        pytest.skip("only a gateway running as root gives each sandbox a uid (it says so)")
    pool = await make_pool(backend)
    async with anyio.create_task_group() as calls:
        name = unique_name("alice")
        calls.start_soon(pool.execute, invocation("hold_for_host", {"name": name}, agent="alice"))
        with anyio.fail_after(30):
            while not (sleeping := processes_named(name)):  # noqa: ASYNC110 (a host process)
                await anyio.sleep(0.01)
        alice_uid = _uid_of(sleeping[0])
        bob = await pool.execute(_shell("id -u", "bob"))
        bob_uid = int(bob.result["stdout"])
        assert alice_uid != bob_uid
        assert {alice_uid, bob_uid} <= set(range(FIRST_SANDBOX_UID, FIRST_SANDBOX_UID + 65_536))
        owners = {p.stat().st_uid for p in pool.workspace_root.iterdir() if p.is_dir()}
        assert owners == {alice_uid, bob_uid}  # each workspace is its sandbox's uid's
        assert {alice_uid, bob_uid} <= pool._uids.live()
        # A shutdown kills alice's call: her uid is given back once the teardown returned.
        await pool.interrupt()
        assert processes_named(name) == []
    await pool.aclose()
    assert pool._uids.live() == set()
