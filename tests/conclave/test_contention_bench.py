"""The contention suite, tiny: real gateway process, real Redis, every mode and workload."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.progress import Progress

from conclave.bench.contention_suite import run_contention
from conclave.bench.suite import BenchContext
from conclave.stack import EmbeddedStack
from gateway.settings import Settings

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def stack() -> Iterator[EmbeddedStack]:
    with EmbeddedStack(Settings(port=0, sandbox_backend="process")) as running:
        yield running


async def test_conclave_modes_stay_serializable_while_naive_loses_updates(
    stack: EmbeddedStack, tmp_path: Path
) -> None:
    ctx = BenchContext(stack, quick=True, seed=7, out_dir=tmp_path, progress=Progress())
    results, paced = await run_contention(ctx, (4,), 60, 16)
    runs = {(r.workload, r.mode): r for r in results}
    assert len(runs) == 12 and all(r.commits >= 60 for r in results)
    for r in [*results, *paced]:
        if r.mode in ("optimistic", "owned"):
            assert r.anomalies == 0, (r.workload, r.mode)
    assert runs[("counter", "naive")].anomalies
    assert runs[("counter", "optimistic")].conflicts > 0  # it was contended, and refused
    assert runs[("dedicated", "optimistic")].conflicts == 0
    assert runs[("counter", "watch")].anomalies is None  # no history to check
    assert {(r.workload, r.mode) for r in paced} == {
        ("counter", "optimistic"), ("counter", "owned"), ("cross", "optimistic"),
        ("cross", "owned"),
    }  # fmt: skip
