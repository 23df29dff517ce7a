"""The docker fleet's background work, in-process: nothing it leaves running outlives it.

The fleet over real engines is `test_engines.py`'s (a system test); here no engine is
reached: its one engine is drained as its health check drains one that stops answering."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from sandbox.backend import EngineLost
from sandbox.backends.docker_fleet import DockerFleet
from sandbox.pool import SandboxPool

pytestmark = pytest.mark.anyio


async def test_work_left_on_a_drained_engine_ends_when_the_pool_closes(tmp_path: Path) -> None:
    """A call blocked on an engine that stopped answering is left to finish while its caller
    hears EngineLost at once; the pool's close ends it, instead of leaving it running after
    the gateway's sandboxes are gone."""
    fleet = DockerFleet([f"unix://{tmp_path}/docker.sock"], "conclave-runtime:test", capacity=4)
    pool = await SandboxPool(fleet).open()
    ended = anyio.Event()

    async def blocked_on_the_engine() -> None:
        try:
            await anyio.sleep_forever()
        finally:
            ended.set()

    try:
        (engine,) = fleet.engines
        engine.lost.set()  # drained
        with anyio.fail_after(5):
            assert isinstance(await fleet.unless_lost(engine, blocked_on_the_engine()), EngineLost)
        assert not ended.is_set()  # left to finish alone
    finally:
        await pool.aclose()  # it leaves task groups: no time limit can wrap it
    assert ended.is_set()
