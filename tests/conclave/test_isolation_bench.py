"""`conclave bench isolation` as a user runs it (quick, on the strongest sandbox): it prints
the victim's row for every attack of issue 26, with whether the attacker was refused, the
operator could revoke and anything was left, and finds no gateway secret a tool can read."""

from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path

from rich.console import Console

from conclave.bench import run_bench
from conclave.bench.isolation.isolation_suite import (
    CONTROL,
    SCENARIOS,
    IsolationOptions,
    Row,
    VictimCalls,
    report,
)
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


def _row(*latencies: float) -> Row:
    return Row(VictimCalls(latencies=list(latencies)), Counter({"ok": 1}))


def test_each_attack_is_judged_against_the_control_rows_p99_and_its_p50_alone() -> None:
    """Fast: the report from rows measured elsewhere (no stack). An attack whose p99 doubles
    the control's fails its goal though it is 2x alone, which the old goal let pass."""
    alone = _row(*([4.0] * 99 + [10.0]))  # p50 4 ms, p99 10 ms
    control = _row(*([5.0] * 99 + [20.0]))  # the machine's own noise: p99 20 ms
    noisy = next(name for name in SCENARIOS if name not in ("alone", CONTROL))
    rows = {"alone": alone, CONTROL: control, noisy: _row(*([5.0] * 99 + [41.0]))}
    result = report(rows, secrets=0, seconds=2.0, backend="bwrap")
    (table,) = result.tables
    assert table.columns[6:10] == [
        "p99 / control p99",
        "p50 / alone p50",
        "alone p99",
        "p99 / alone",
    ]
    by_name = {row[0]: row for row in table.rows}
    assert by_name[noisy][6:8] == ["2.05x", "1.25x"] and by_name[noisy][9] == "4.10x"
    assert by_name[CONTROL][6] == "1.00x"  # the control row, printed as it is
    goals = {goal.name: goal.met for goal in result.goals}
    assert goals[f"{noisy}: victim p99 / control p99"] is False
    assert goals[f"{noisy}: victim p50 / alone p50"] is True
    assert not any(name.endswith("p99 / alone") for name in goals)
