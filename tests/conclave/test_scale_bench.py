"""`conclave bench scale` as a user runs it (quick): one row per gateway-process count and
workload, each with a measured rate and where the CPU went, and, printed with it, where the
cores saturate for each workload, with the sentence that explains it."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from conclave.bench import run_bench
from conclave.bench.scale_suite import CALLS, COMMITS, PROCESS_COUNTS
from gateway import Settings

pytestmark = pytest.mark.system  # starts stacks or engines in its tests' bodies


def test_the_scale_suite_prints_a_row_per_process_count_and_workload(
    redis_url: str, tmp_path: Path
) -> None:
    out = io.StringIO()
    (result,) = run_bench(
        ["scale"],
        quick=True,
        seed=7,
        out_root=tmp_path,
        console=Console(file=out, width=240),
        settings=Settings(redis_url=redis_url, port=0, sandbox_backend="process"),
    )
    table, saturation = result.tables
    assert [(row[0], row[1]) for row in table.rows] == [
        (n, workload) for n in PROCESS_COUNTS for workload in (COMMITS, CALLS)
    ]
    assert all(row[2] > 0 and row[4] > 0 and row[5] > 0 and row[7] > 0 for row in table.rows)
    assert [row[3] for row in table.rows[:2]] == [1.0, 1.0]  # the baseline row is 1x
    assert [row[0] for row in saturation.rows] == [COMMITS, CALLS]
    assert all(row[3] > 0 and row[4] > 0 for row in saturation.rows)  # CPU per op, ceiling
    assert all(" cores carry at most " in note for note in result.notes[:2])
    printed = out.getvalue()
    assert "scale: gateway processes" in printed and "cores saturate" in printed
