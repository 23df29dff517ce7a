"""Runs suites on one embedded stack, renders their tables and writes their results."""

from __future__ import annotations

import json
import os
import time
import traceback
from collections.abc import Mapping
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table as RichTable

from conclave.bench.core.report import (
    durations_table,
    open_report,
    run_description,
    summary_table,
    write_report,
)
from conclave.bench.core.suite import BenchContext, SuiteOptions, SuiteResult, Table
from conclave.bench.core.suite_registry import SUITES, load_suite
from conclave.bench.core.transient_retry import SUITE_ATTEMPTS, suite_backoff, transient_refusal
from conclave.stack import DEFAULT_GATEWAY, EmbeddedStack
from gateway import Settings


def render_table(console: Console, table: Table) -> None:
    rich_table = RichTable(title=table.title, title_justify="left")
    for column in table.columns:
        rich_table.add_column(column)
    for row in table.rows:
        rich_table.add_row(*(_cell(v) for v in row))
    console.print(rich_table)


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _run_suite(name: str, ctx: BenchContext, console: Console) -> SuiteResult:
    """One suite, timed; one that fails is reported with its error and the run goes on, so a
    long run always ends in its summary and report (the CLI's exit code says it failed). One
    stopped by a transient refusal runs again first (`transient_retry`)."""
    started = time.monotonic()
    policy = suite_backoff(ctx.seed)
    retries: list[str] = []
    for attempt in range(1, SUITE_ATTEMPTS + 1):
        try:
            result = load_suite(name)(ctx)
            break
        except Exception as exc:  # any failure of one suite: recorded, the others still run
            refusal = transient_refusal(exc)
            if refusal is not None and attempt < SUITE_ATTEMPTS:
                wait_s = policy.backoff_ms(attempt - 1, refusal.retry_after_ms) / 1000
                retries.append(
                    f"attempt {attempt} stopped on {refusal.code} (transient): ran again"
                    f" after {wait_s:.1f} s"
                )
                console.print(f"[yellow]{name}[/]: {retries[-1]}")
                time.sleep(wait_s)
                continue
            error = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            console.print(f"[bold red]{name} failed[/]: {error}")
            (ctx.out_dir / f"{name}-error.txt").write_text(traceback.format_exc())
            result = SuiteResult(name, error=error)
            break
    result.notes.extend(retries)
    result.seconds = time.monotonic() - started
    console.print(f"{name}: {result.seconds:.1f} s")
    return result


def run_bench(
    names: list[str],
    *,
    quick: bool,
    seed: int,
    out_root: Path,
    console: Console,
    settings: Settings | None = None,
    options: Mapping[str, SuiteOptions] | None = None,
    chains: int | None = None,
    conformance_requirements: str | None = None,
) -> list[SuiteResult]:
    names = names or list(SUITES)
    for name in names:
        load_suite(name)  # unknown names fail before anything starts
    out_dir = out_root / time.strftime("%Y%m%d-%H%M%S")
    out_dir.mkdir(parents=True, exist_ok=True)
    results: list[SuiteResult] = []
    log_path = out_dir / "gateway.log"
    ran = run_description(names, quick=quick, options=options)
    console.print(f"[bold]conclave bench[/]: {ran}, seed {seed}")
    with EmbeddedStack(settings or Settings(port=0), log_path=log_path) as stack:
        assert stack.backend is not None
        console.print(
            f"[bold]gateway[/] {stack.url}  [bold]sandbox[/] {stack.backend.name}"
            f" ({stack.backend.reason})"
        )
        progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), console=console, transient=True,
        )  # fmt: skip
        with progress:
            for name in names:
                ctx = BenchContext(
                    stack, quick, seed, out_dir, progress, options or {}, chains,
                    conformance_requirements,
                )  # fmt: skip
                result = _run_suite(name, ctx, progress.console)
                results.append(result)
                (out_dir / f"{name}.json").write_text(json.dumps(result.to_json(), indent=2))
                for table in result.tables:
                    progress.console.print()
                    render_table(progress.console, table)
    console.print()
    render_table(console, summary_table(results))
    render_table(console, durations_table(results))
    (out_dir / "summary.json").write_text(
        json.dumps(
            {"suites": [r.suite for r in results], "quick": quick, "ran": ran, "seed": seed},
            indent=2,
        )
    )
    console.print(f"results: {out_dir}")
    # The bench's own gateway has stopped; a gateway the user runs (`conclave serve`, at
    # CONCLAVE_URL) is linked from the report, its console one click away.
    serving = os.environ.get("CONCLAVE_URL") or DEFAULT_GATEWAY
    report = write_report(out_dir, results, quick=quick, seed=seed, gateway_url=serving, ran=ran)
    console.print(f"report:  {report}")
    open_report(report)
    return results
