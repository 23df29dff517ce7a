"""`conclave bench federation` as a user runs it (quick, on the strongest sandbox): both
tables print, each with its direct row and its through-the-gateway row, and every goal is
checked against a figure."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from conclave.bench import run_bench
from conclave.bench.mcp.federation_suite import DIRECT, GATEWAY, STDIO_DIRECT, STDIO_GATEWAY
from gateway import Settings


def test_the_federation_suite_prints_both_sources_tables(
    redis_url: str, docker_engine: str, tmp_path: Path
) -> None:
    out = io.StringIO()
    (result,) = run_bench(
        ["federation"],
        quick=True,
        seed=7,
        out_root=tmp_path,
        console=Console(file=out, width=200),
        settings=Settings(redis_url=redis_url, port=0),
    )
    http, stdio = result.tables
    assert [row[0] for row in http.rows] == [DIRECT, GATEWAY]
    assert [row[0] for row in stdio.rows][:2] == [STDIO_DIRECT, STDIO_GATEWAY]
    assert all(row[1] > 0 for row in (*http.rows, *stdio.rows))  # measured, not placeholders
    assert {"mcp_http added_p50_ms", "mcp_stdio first_call_ms"} <= set(result.figures)
    assert len(result.goals) == 4 and "mcp_stdio: first call" in out.getvalue()
