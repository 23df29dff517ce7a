"""`conclave bench a2a` as a user runs it (quick): its first table has the agent's direct row and
the through-the-gateway row, measured; its second the three-hop cascade's; its third the chaos
rows (a worker killed mid-task 10 times), yes or no; every goal is checked against figures."""

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
    hop, cascade, chaos = result.tables
    assert [row[0] for row in hop.rows] == [DIRECT, GATEWAY]
    assert all(row[1] > 0 and row[4] > 0 for row in hop.rows)  # measured p50 and calls/s
    assert [row[1] for row in cascade.rows] == [10, 10]  # quick: 10 cancels, 10 chains
    assert all(row[2] > 0 for row in cascade.rows[:1])  # the cancel took time to reach C
    assert chaos.rows[0][1] == 10  # quick: 10 workers killed
    assert {row[2] for row in chaos.rows} <= {"yes", "no"}
    assert {"a2a added_p50_ms", "a2a calls_per_s share"} <= set(result.figures)
    assert [goal.name for goal in result.goals] == [
        "a2a: added p50", "a2a: calls/s c=16 vs the agent's own",
        "a2a: cancel across three hops, to the last tool process gone (p99)",
        "a2a: deadline violations over 10 three-hop chains",
        "a2a: a worker killed mid-task 10 times: every task ended once, artifacts whole",
        "a2a: a dead worker's task resumed (max)",
    ]  # fmt: skip
    assert "a2a: added p50" in out.getvalue()
