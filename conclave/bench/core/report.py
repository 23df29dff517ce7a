"""The HTML report: `index.html` next to the suites' JSON, with their tables and plots.

One self-contained page per run (PNG plots beside it), so a run's folder can be copied or
archived as it is. It opens in a browser only where a person can see it: a display exists
and this is not CI. When the bench ran against a gateway that still answers, the page links
to its live console.
"""

from __future__ import annotations

import html
import os
import time
import webbrowser
from collections.abc import Mapping
from pathlib import Path

import httpx

from conclave.bench.core.plots import plot_series
from conclave.bench.core.suite import SuiteOptions, SuiteResult, Table
from conclave.bench.core.suite_registry import SUITES

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem; color: #222; max-width: 1100px; }
table { border-collapse: collapse; margin: 0.5rem 0 1.5rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.6rem; text-align: right; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
.no { color: #b00; font-weight: bold; } .yes { color: #070; }
img { max-width: 100%; border: 1px solid #eee; margin: 0.5rem 0; }
"""


def _cell(value: object) -> str:
    if isinstance(value, float):
        text = f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"
    elif isinstance(value, int) and not isinstance(value, bool):
        text = f"{value:,}"
    else:
        text = str(value)
    css = {"NO": "no", "yes": "yes"}.get(text)
    return f'<td class="{css}">{html.escape(text)}</td>' if css else f"<td>{html.escape(text)}</td>"


def _table(table: Table) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in table.columns)
    rows = "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in table.rows)
    return f"<h3>{html.escape(table.title)}</h3><table><tr>{head}</tr>{rows}</table>"


def summary_table(results: list[SuiteResult]) -> Table:
    """Every goal of every suite, and a NO row for each suite that stopped before its end."""
    summary = Table("Summary", ["suite", "goal", "target", "measured", "met"])
    for result in results:
        if result.error is not None:
            summary.rows.append([result.suite, "ran to its end", "yes", result.error, "NO"])
        for goal in result.goals:
            met = "yes" if goal.met else "NO"
            summary.rows.append([result.suite, goal.name, goal.target, goal.measured, met])
    return summary


def durations_table(results: list[SuiteResult]) -> Table:
    """How long each suite ran, and whether it ran to its end."""
    durations = Table("Durations", ["suite", "seconds", "ended"])
    for result in results:
        ended = "yes" if result.error is None else "NO"
        durations.rows.append([result.suite, round(result.seconds, 1), ended])
    durations.rows.append(["all", round(sum(r.seconds for r in results), 1), ""])
    return durations


def run_description(
    names: list[str], *, quick: bool, options: Mapping[str, SuiteOptions] | None = None
) -> str:
    """What ran, in words: "quick pass" or "full pass" only when every suite ran all of its
    work; else the suites by name, their parameters and the part a suite's options chose."""
    mode = "quick" if quick else "full"
    given = options or {}
    samples = [
        f"{name}: {note}"
        for name in names
        if name in given and (note := given[name].sample_note()) is not None
    ]
    if sorted(names) == sorted(SUITES) and not samples:
        return f"{mode} pass of every suite"
    words = f"{mode} parameters" if len(names) > 1 else f"{mode} run"
    text = f"{', '.join(names)} only ({len(names)} of {len(SUITES)} suites), {words}"
    return "; ".join([text, *samples])


def console_link(gateway_url: str | None) -> str:
    """A link to `<gateway_url>/console` while a gateway answers there; else nothing."""
    if not gateway_url:
        return ""
    try:
        running = httpx.get(f"{gateway_url}/healthz", timeout=2.0).status_code == 200
    except httpx.HTTPError:
        running = False
    if not running:
        return ""
    console = html.escape(f"{gateway_url.rstrip('/')}/console")
    return f'<p>Live console of the gateway this run used: <a href="{console}">{console}</a></p>'


def write_report(
    out_dir: Path,
    results: list[SuiteResult],
    *,
    quick: bool,
    seed: int,
    gateway_url: str | None = None,
    ran: str | None = None,
) -> Path:
    """Write `index.html` (and its PNGs) into the run's folder; return its path.
    `gateway_url`: the gateway the run used; linked (its console) if it still answers.
    `ran`: what ran, in words (default: `run_description` of the results' suites)."""
    ran = ran or run_description([r.suite for r in results], quick=quick)
    sections = [
        console_link(gateway_url)
        + _table(summary_table(results))
        + _table(durations_table(results))
    ]
    for result in results:
        parts = [f'<h2 id="{html.escape(result.suite)}">{html.escape(result.suite)}</h2>']
        parts += [_table(table) for table in result.tables]
        for key, data in result.series.items():
            image = plot_series(result.suite, key, data, out_dir)
            if image is not None:
                parts.append(f'<img src="{image.name}" alt="{html.escape(key)}">')
        parts += [f"<p>{html.escape(note)}</p>" for note in result.notes]
        parts.append(f'<p><a href="{html.escape(result.suite)}.json">raw JSON</a></p>')
        sections.append("\n".join(parts))
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    page = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>Conclave bench {stamp}</title>"
        f"<style>{_STYLE}</style></head><body><h1>Conclave bench</h1>"
        f"<p>{stamp}, {html.escape(ran)}, seed {seed}</p>" + "\n".join(sections) + "</body></html>"
    )
    path = out_dir / "index.html"
    path.write_text(page)
    return path


def can_show_browser() -> bool:
    """Open a browser only for a person at a display, never in CI."""
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        return False
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def open_report(path: Path) -> bool:
    if not can_show_browser():
        return False
    return webbrowser.open(path.resolve().as_uri())
