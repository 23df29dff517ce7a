"""A hosted agent's worker killed mid-task (SIGKILL), five times: the bench's chaos row
(`conclave.bench.a2a.worker_chaos`) at CI's size. Every task ends once, COMPLETED, holding
each of its artifacts once; each task a killed worker left is resumed by the other worker
within the lease plus 1 s."""

from __future__ import annotations

from pathlib import Path

import pytest

from conclave.bench.a2a.worker_chaos import RESUME_GOAL_S, chaos_config, chaos_samples
from conclave.stack import EmbeddedStack
from tests.e2e.conftest import e2e_settings

pytestmark = pytest.mark.system


def test_a_worker_killed_mid_task_loses_and_doubles_nothing(redis_url: str, tmp_path: Path) -> None:
    config = tmp_path / "conclave.toml"
    config.write_text(chaos_config())
    with EmbeddedStack(e2e_settings(redis_url, "process", config=config)) as stack:
        samples = chaos_samples(stack, 5, tmp_path / "marks")
    assert samples.faults == []
    assert len(samples.resumed_s) + samples.ended_after_kill == 5
    assert samples.resumed_s, "no kill landed mid-task"
    assert max(samples.resumed_s) <= RESUME_GOAL_S, samples.resumed_s
