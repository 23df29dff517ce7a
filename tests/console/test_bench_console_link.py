"""The `conclave bench` report links to the live console of a gateway that is running."""

from __future__ import annotations

from pathlib import Path

from conclave.bench.core.report import write_report
from conclave.bench.core.suite import SuiteResult
from conclave.stack import EmbeddedStack


def test_the_report_links_to_a_running_gateways_console(
    console_stack: EmbeddedStack, tmp_path: Path
) -> None:
    results = [SuiteResult("console")]
    page = write_report(tmp_path, results, quick=True, seed=7, gateway_url=console_stack.url)
    assert f'<a href="{console_stack.url}/console">' in page.read_text()


def test_no_link_when_no_gateway_answers(tmp_path: Path) -> None:
    gone = "http://127.0.0.1:9"  # the discard port: nothing serves HTTP there
    page = write_report(tmp_path, [SuiteResult("console")], quick=True, seed=7, gateway_url=gone)
    assert "/console" not in page.read_text()
    page = write_report(tmp_path, [SuiteResult("console")], quick=True, seed=7)
    assert "Live console" not in page.read_text()
