"""The bench report: index.html with the suites' tables and PNG plots of their series."""

from __future__ import annotations

from pathlib import Path

import pytest

from conclave.bench.core.report import can_show_browser, run_description, write_report
from conclave.bench.core.suite import Goal, SuiteResult, Table
from conclave.bench.core.suite_registry import SUITES
from conclave.bench.tasks.task_models import TaskOptions

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_the_report_holds_tables_goals_and_one_plot_per_series(tmp_path: Path) -> None:
    result = SuiteResult(
        "gateway",
        tables=[Table("Echo overhead", ["agents", "p50 ms"], [[1, 1.25], [8, 3.5]])],
        goals=[Goal("p50 overhead", "< 5 ms", "1.25 ms", True), Goal("p99", "< 9", "12", False)],
        series={
            "latency_ms": {"echo": [1.0, 1.2, 1.1, 5.0], "run_python": [9.0, 11.0]},
            "throughput_vs_agents": {"echo": [[1, 500.0], [8, 2200.0], [4, 1500.0]]},
            "opaque": {"note": "not plottable"},
        },
    )
    path = write_report(tmp_path, [result], quick=True, seed=7)
    page = path.read_text()
    assert path == tmp_path / "index.html"
    assert "Echo overhead" in page and "<td>3.500</td>" in page
    assert '<td class="no">NO</td>' in page  # the unmet goal stands out
    for name in ("gateway-latency_ms.png", "gateway-throughput_vs_agents.png"):
        assert f'src="{name}"' in page
        image = (tmp_path / name).read_bytes()
        assert image.startswith(PNG_MAGIC) and len(image) > 5_000
    assert not (tmp_path / "gateway-opaque.png").exists()


def test_no_browser_in_ci_even_with_a_display(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISPLAY", ":0")
    monkeypatch.setenv("CI", "true")
    assert not can_show_browser()
    monkeypatch.delenv("CI")
    assert can_show_browser()


def test_what_ran_names_the_part_a_suites_options_chose() -> None:
    """The report's line on what ran reads each suite's own options through the core's
    `SuiteOptions`, without the core knowing the tasks suite."""
    every = list(SUITES)
    sampled = {"tasks": TaskOptions(tasks=1)}
    assert run_description(every, quick=True, options={"tasks": TaskOptions()}) == (
        "quick pass of every suite"
    )
    assert run_description(["tasks"], quick=False, options=sampled) == (
        f"tasks only (1 of {len(SUITES)} suites), full run; tasks: a sample of 1 task a part"
    )
    assert run_description(["gateway"], quick=True, options=sampled) == (
        f"gateway only (1 of {len(SUITES)} suites), quick run"
    )
