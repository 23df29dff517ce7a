"""The budgets suite's offline simulation: it replays the suite's chains against the same
decision rules, and says on every line that it is a simulation, not a measurement."""

from __future__ import annotations

from conclave.bench.recovery import budgets_sim
from conclave.bench.recovery.budgets_suite import DEADLINES_MS, POLICIES


def test_the_simulation_labels_every_line_and_gives_every_policy_a_row() -> None:
    lines: list[str] = []
    budgets_sim.main(["--chains", "4"], echo=lines.append)
    assert lines and all(line.startswith("SIMULATION") or line.startswith(("policy", *POLICIES))
                         for line in lines)  # fmt: skip
    headers = [line for line in lines if line.startswith("SIMULATION ")]
    assert len(headers) == 3  # the run's assumptions, then one per workload
    for policy in POLICIES:
        rows = [line for line in lines if line.split()[0] == policy]
        assert len(rows) == 2 and all(len(row.split()) >= len(DEADLINES_MS) for row in rows)


def test_atba_never_runs_past_the_deadline_when_the_host_costs_what_it_assumes() -> None:
    """With the per-call overhead the gateway plans for (reply margin plus a kill's lateness)
    and no jitter, ATBA's answers all come in time; a fixed split's do not."""
    host = budgets_sim.Host(call_ms=20.0, jitter_ms=1e-6, kill_late_ms=10.0, reply_margin_ms=30)
    found = budgets_sim.simulate(30, 7, host, 0.1, ("fixed-split", "atba", "atba+hedge"))
    for results in found.values():
        late = {p: sum(o.violated for d in DEADLINES_MS for o in results[(d, p)]) for p in
                ("fixed-split", "atba", "atba+hedge")}  # fmt: skip
        assert late["atba"] == late["atba+hedge"] == 0 and late["fixed-split"] > 0
