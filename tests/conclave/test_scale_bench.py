"""`conclave bench scale` as a user runs it (quick, docs/benchmarks.md's command as written):
one row per gateway-process count and workload, each with a measured rate and where the CPU
went, and, printed with it, where the cores saturate for each workload, with the sentence that
explains it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conclave.bench.overhead.scale_suite import CALLS, COMMITS, PROCESS_COUNTS
from tests.helpers import documented_example, run_documented

pytestmark = pytest.mark.system  # starts stacks or engines in its tests' bodies


def test_the_scale_suite_prints_a_row_per_process_count_and_workload(tmp_path: Path) -> None:
    # docs/benchmarks.md's <!-- example: scale-quick --> (tests/test_docs.py leaves it to this
    # test, so the suite runs once for both)
    block = documented_example("docs/benchmarks.md", "scale-quick")
    assert block.startswith("conclave bench scale --quick")
    done = run_documented(block, tmp_path, timeout_s=900)
    assert done.returncode == 0, done.stderr[-2000:]
    [written] = (tmp_path / "bench-results").glob("*/scale.json")
    result = json.loads(written.read_text())
    table, saturation = result["tables"]
    assert [(row[0], row[1]) for row in table["rows"]] == [
        (n, workload) for n in PROCESS_COUNTS for workload in (COMMITS, CALLS)
    ]
    rows, saturated = table["rows"], saturation["rows"]
    assert all(row[2] > 0 and row[4] > 0 and row[5] > 0 and row[7] > 0 for row in rows)
    assert [row[3] for row in rows[:2]] == [1.0, 1.0]  # the baseline row is 1x
    assert [row[0] for row in saturated] == [COMMITS, CALLS]
    assert all(row[3] > 0 and row[4] > 0 for row in saturated)  # CPU per op, ceiling
    assert all(" cores carry at most " in note for note in result["notes"][:2])
    printed = done.stdout
    assert "scale: gateway processes" in printed and "cores saturate" in printed
    assert "commits/s, dedicated keys" in printed  # what the page tells the reader to expect
