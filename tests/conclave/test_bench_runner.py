"""`conclave bench` runs every suite it was asked for even when one fails: the failure is
in the summary and the report with its error, each suite's duration is printed, and the exit
code says that something failed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from conclave.bench.core import suite_registry
from conclave.cli import app

pytestmark = pytest.mark.system  # it starts stacks in its tests' bodies


@pytest.fixture
def suites(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(suite_registry.SUITES, "broken", "tests.conclave.broken_suite")
    monkeypatch.setitem(suite_registry.SUITES, "fine", "tests.conclave.readiness_suite")
    monkeypatch.setitem(suite_registry.SUITES, "flaky", "tests.conclave.flaky_suite")


def test_a_failing_suite_is_reported_and_the_others_still_run(
    suites: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONCLAVE_SANDBOX_BACKEND", "process")
    monkeypatch.setenv("COLUMNS", "200")
    done = CliRunner().invoke(app, ["bench", "broken", "fine", "--out", str(tmp_path)])
    assert done.exit_code == 1, done.output
    assert "broken failed" in done.output and "SANDBOX_UNAVAILABLE" in done.output
    assert "conclave bench: broken failed (see the summary)" in done.output
    [run] = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert json.loads((run / "summary.json").read_text())["suites"] == ["broken", "fine"]
    broken = json.loads((run / "broken.json").read_text())
    assert broken["error"].startswith("RuntimeError: SANDBOX_UNAVAILABLE")
    assert "Traceback" in (run / "broken-error.txt").read_text()
    fine = json.loads((run / "fine.json").read_text())
    assert fine["error"] is None and fine["goals"][0]["met"] is True
    page = (run / "index.html").read_text()
    assert "ran to its end" in page and "Durations" in page
    for name in ("broken", "fine"):
        assert f"{name}: " in done.output  # its duration, as it ends


def test_the_summary_marks_the_failed_suite(suites: None, tmp_path: Path) -> None:
    from conclave.bench.core.suite_runner import run_bench
    from gateway import Settings

    console = Console(record=True, width=200)
    results = run_bench(
        ["broken"],
        quick=True,
        seed=1,
        out_root=tmp_path,
        console=console,
        settings=Settings(port=0, sandbox_backend="process"),
    )
    assert [r.error is not None for r in results] == [True]
    text = console.export_text()
    assert "ran to its end" in text and "NO" in text


def test_a_suite_stopped_by_a_transient_refusal_runs_again(
    suites: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SANDBOX_UNAVAILABLE (retryable, retry_backoff) is retried after the SDK's backoff; the
    run ends with the suite's figures, and its notes say what happened."""
    monkeypatch.setenv("CONCLAVE_SANDBOX_BACKEND", "process")
    monkeypatch.setenv("COLUMNS", "200")
    done = CliRunner().invoke(app, ["bench", "flaky", "--out", str(tmp_path)])
    assert done.exit_code == 0, done.output
    assert "attempt 1 stopped on SANDBOX_UNAVAILABLE (transient): ran again after" in done.output
    [run] = [p for p in tmp_path.iterdir() if p.is_dir()]
    flaky = json.loads((run / "flaky.json").read_text())
    assert flaky["error"] is None and flaky["goals"][0]["measured"] == "2"
    assert "SANDBOX_UNAVAILABLE" in (run / "index.html").read_text()  # the note, in the report


def test_the_report_says_what_ran_not_a_full_pass(
    suites: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A named suite runs with full parameters; that is not a full pass of the bench."""
    monkeypatch.setenv("CONCLAVE_SANDBOX_BACKEND", "process")
    monkeypatch.setenv("COLUMNS", "200")
    done = CliRunner().invoke(app, ["bench", "fine", "--out", str(tmp_path)])
    assert done.exit_code == 0, done.output
    count = len(suite_registry.SUITES)
    assert f"fine only (1 of {count} suites), full run" in done.output
    [run] = [p for p in tmp_path.iterdir() if p.is_dir()]
    page = (run / "index.html").read_text()
    assert f"fine only (1 of {count} suites), full run" in page and "full pass" not in page
    summary = json.loads((run / "summary.json").read_text())
    assert summary["ran"] == f"fine only (1 of {count} suites), full run"
