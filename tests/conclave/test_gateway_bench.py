"""`conclave bench gateway` with the least calls that show its rows (issue 24): a `/mcp` call
answered as an event stream is measured with the plain one, in the same table, and what it
adds to the plain call's p50 is a figure and a goal."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.progress import Progress

from conclave.bench.core import BenchContext, measuring_settings
from conclave.bench.overhead import gateway_suite
from conclave.bench.overhead.gateway_suite import (
    HISTORY,
    PLAIN,
    REST,
    REST_AFTER,
    STREAMED,
    STREAMED_ADDED,
)
from conclave.stack import EmbeddedStack
from gateway import Settings

pytestmark = pytest.mark.system  # starts stacks in its body


def test_a_streamed_mcp_call_is_measured_against_a_plain_one(
    redis_url: str, tmp_path: Path
) -> None:
    settings = measuring_settings(Settings(redis_url=redis_url))
    with EmbeddedStack(settings, log_path=tmp_path / "stack-gateway.log") as stack:
        ctx = BenchContext(stack, quick=True, seed=7, out_dir=tmp_path, progress=Progress())
        # A streamed call answered plain JSON, or not read to its last event, fails the suite.
        result = gateway_suite.measure(ctx, count=20, seconds=0.2)
    paths = [row[0] for row in result.tables[0].rows]
    assert paths[paths.index(PLAIN) + 1] == STREAMED
    rows = {row[0]: row for row in result.tables[0].rows}
    plain, streamed = rows[PLAIN], rows[STREAMED]
    assert streamed[1] > 0 and streamed[2] >= streamed[1] and streamed[5] > 0  # p50, p99, c=16
    assert result.figures[STREAMED_ADDED] == pytest.approx(streamed[1] - plain[1])
    goals = {goal.name: goal for goal in result.goals}
    goal = goals["streamed /mcp call: added p50 over a plain one"]
    assert goal.target == "<= 1 ms"
    assert goal.measured == f"{result.figures[STREAMED_ADDED]:.3f} ms"
    assert not [name for name in goals if name.startswith(STREAMED)]  # its one goal is that
    assert any("echo_with_progress" in note for note in result.notes)
    # Issue 39: the REST row again after 10,000 calls, with what each call read from Redis.
    history = {row[0]: row for row in result.tables[1].rows}
    fresh, after = history[REST], history[REST_AFTER]
    assert fresh[1] > 0 and after[1] > 0 and fresh[2] > 0 and 0 < after[2] < 4 * fresh[2]
    assert f"gateway HTTP /v1/tools: calls/s after {HISTORY:,} calls vs fresh" in goals
