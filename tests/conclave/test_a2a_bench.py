"""`conclave bench a2a` as a user runs it (quick): its table has the agent's direct row and the
through-the-gateway row, measured, and both goals are checked against figures."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from conclave.bench import run_bench
from conclave.bench.a2a.a2a_suite import DIRECT, GATEWAY
from gateway import Settings


def test_the_a2a_suite_prints_direct_and_through_rows(
    redis_url: str, docker_engine: str, tmp_path: Path
) -> None:
    out = io.StringIO()
    (result,) = run_bench(
        ["a2a"],
        quick=True,
        seed=7,
        out_root=tmp_path,
        console=Console(file=out, width=200),
        settings=Settings(redis_url=redis_url, port=0),
    )
    (table,) = result.tables
    assert [row[0] for row in table.rows] == [DIRECT, GATEWAY]
    assert all(row[1] > 0 and row[4] > 0 for row in table.rows)  # measured p50 and calls/s
    assert {"a2a added_p50_ms", "a2a calls_per_s share"} <= set(result.figures)
    assert [goal.name for goal in result.goals] == [
        "a2a: added p50", "a2a: calls/s c=16 vs the agent's own",
    ]  # fmt: skip
    assert "a2a: added p50" in out.getvalue()
