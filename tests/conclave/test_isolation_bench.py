"""`conclave bench isolation` as a user runs it (quick, on the strongest sandbox): it prints
the victim's row for every attack of issue 26, with whether the attacker was refused, the
operator could revoke and anything was left, and finds no gateway secret a tool can read."""

from __future__ import annotations

import io
import json
from pathlib import Path

from rich.console import Console

from conclave.bench import run_bench
from conclave.bench.isolation.isolation_suite import CONTROL, SCENARIOS, IsolationOptions
from gateway import Settings


def test_the_isolation_suite_prints_every_scenario_and_finds_no_secret(
    redis_url: str, docker_engine: str, tmp_path: Path
) -> None:
    out = io.StringIO()
    (result,) = run_bench(
        ["isolation"],
        quick=True,
        seed=7,
        out_root=tmp_path,
        console=Console(file=out, width=200),
        settings=Settings(redis_url=redis_url, port=0),
        options={"isolation": IsolationOptions(row_s=1.5)},  # what runs, not its figures
    )
    (table,) = result.tables
    assert [row[0] for row in table.rows] == list(SCENARIOS)
    assert all(row[1] > 0 for row in table.rows)  # every scenario measured victim calls
    assert result.figures["gateway secrets readable by a tool"] == 0
    assert "noisy forges results" in out.getvalue()
    assert table.columns[-3:] == [
        "attacker refused (SERF)",
        "revoke works",
        "left: fds/procs/bytes",
    ]
    attacks = [row for row in table.rows if row[0] not in ("alone", CONTROL)]
    assert len(attacks) == len(SCENARIOS) - 2
    for row in attacks:  # every attack says what the attacker got, and the rest
        assert str(row[-3]).startswith(("yes (", "NO (")) and row[-2] in ("yes", "NO"), row
    (control,) = [row for row in table.rows if row[0] == CONTROL]
    assert control[-3:] == ["-", "-", "-"]  # no attacker: nothing refused, revoked or left
    (written,) = tmp_path.glob("*/isolation.json")
    assert json.loads(written.read_text())["suite"] == "isolation"
