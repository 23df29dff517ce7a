"""The table a "direct vs through the gateway" suite prints (federation's mcp_http rows, a2a):
each path's p50 and p99, the p50 it adds over the direct path, its calls/s at concurrency and
their share of the direct path's, and the two goals on the gateway's row."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

from conclave.bench.core.stats import percentile
from conclave.bench.core.suite import Goal, SuiteResult, Table

COLUMNS = ["path", "p50", "p99", "added p50", "calls/s c=16", "share of direct calls/s"]
Row = tuple[Sequence[float], float]  # latency samples (ms), calls/s


def add_hop_rows(
    result: SuiteResult,
    title: str,
    rows: Mapping[str, Row],
    *,
    direct: str,
    through: str,
    label: str,
    goal_added_ms: float,
    goal_share: float,
    direct_name: str,
) -> None:
    """`rows` (by path, `direct` among them) as a table of `result`, its figures (`label`
    added_p50_ms, calls_per_s share) and its two goals on the `through` row."""
    table = Table(title, COLUMNS)
    result.tables.append(table)
    direct_samples, direct_rate = rows[direct]
    direct_p50 = statistics.median(direct_samples)
    for path, (samples, rate) in rows.items():
        p50 = statistics.median(samples)
        row = [path, p50, percentile(samples, 0.99), p50 - direct_p50, round(rate)]
        table.rows.append([*row, rate / direct_rate])
        result.series[path] = {"p50": p50, "rate": rate}
    added = statistics.median(rows[through][0]) - direct_p50
    share = rows[through][1] / direct_rate
    result.figures[f"{label} added_p50_ms"] = added
    result.figures[f"{label} calls_per_s share"] = share
    result.goals += [
        Goal(f"{label}: added p50", f"<= {goal_added_ms} ms", f"{added:.3f} ms",
             added <= goal_added_ms),
        Goal(f"{label}: calls/s c=16 vs {direct_name}", f">= {goal_share:.0%}",
             f"{share:.0%}", share >= goal_share),
    ]  # fmt: skip
