"""`conclave bench chaos --quick` on the real parts: a six-node Redis Cluster per durability
mode, two gateway processes behind HAProxy, sandboxes on the machine's Docker engine and a
spare dockerd, every fault injected once (a master failover, a gateway SIGKILL, an engine
restart, containers killed, a master paused).

It asserts what holds whatever the timing: the table has a row per fault and mode, every
failed request is booked (by SERF code, or as "no answer"), the counts add up, every fault
ended (a recovery time, or "not recovered"), no process it started is left behind, and each
sandbox container left behind is counted and named.
How much was lost or how fast it recovered is the bench's to print, not this test's.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.progress import Progress

from conclave.bench.chaos.chaos_suite import COLUMNS, MODES, run
from conclave.bench.core.suite import BenchContext
from conclave.stack import EmbeddedStack
from gateway.config import Settings

FAULTS = (
    "Redis master SIGKILL (failover) #1",
    "gateway process SIGKILL mid-commit #1",
    "Docker engine restart (SIGTERM, start) #1",
    "docker kill every sandbox container #1",
    "Redis master SIGSTOP 3 s #1",
)


@pytest.fixture(scope="module")
def stack() -> Iterator[EmbeddedStack]:
    with EmbeddedStack(Settings(port=0, sandbox_backend="process")) as running:
        yield running


def _booked(cell: str) -> int:
    """The sum of a 'CODE n, CODE n' cell ('-' when nothing failed)."""
    return sum(int(n) for n in re.findall(r" (\d+)(?:,|$)", cell))


def test_quick_chaos_run_books_every_failure_and_every_leftover(
    stack: EmbeddedStack, tmp_path: Path
) -> None:
    ctx = BenchContext(stack, quick=True, seed=1, out_dir=tmp_path, progress=Progress())
    result = run(ctx)
    (table,) = result.tables
    assert table.columns == COLUMNS
    rows = {(row[0], row[1]): row for row in table.rows}
    for mode in MODES:
        phases = [row[1] for row in table.rows if row[0] == mode]
        assert phases[:-1] == ["calm", *FAULTS], phases
        total = rows[(mode, phases[-1])]
        left = re.findall(r"leaked: (\d+) containers, (\d+) processes", total[1])
        assert left and left[0][1] == "0", total[1]  # every gateway and Redis process ended
        # each container left behind is named, with its engine, in the notes (up to 3)
        named = [n for n in result.notes if n.startswith(f"{mode} left: conclave-sbx-")]
        assert len(named) == min(3, int(left[0][0])), (total[1], result.notes)
        assert int(re.findall(r"\((\d+) acked", total[1])[0]) > 0  # the callers really ran
        faults = [rows[(mode, fault)] for fault in FAULTS]
        for column in (2, 4, 5, 6, 7, 8):  # ok, no answer, late, lost, anomalies, reissued
            summed = int(rows[(mode, "calm")][column]) + sum(int(r[column]) for r in faults)
            assert summed == total[column], (mode, COLUMNS[column])
        failed = _booked(rows[(mode, "calm")][3]) + sum(_booked(r[3]) for r in faults)
        assert failed == _booked(total[3]), mode
        for row in faults:
            assert row[9] == "not recovered" or float(row[9]) >= 0, row
            assert re.fullmatch(r"-|[A-Z_]+ \d+(, [A-Z_]+ \d+)*", row[3]), row[3]
    goals = {goal.name: goal for goal in result.goals}
    for mode in MODES:
        assert f"{mode}: containers and processes leaked" in goals
    assert "replicated: acked commits lost (1 failovers)" in goals
