"""`conclave bench governance` with the least work that shows its rows (issue 42): the policy
rows compare 100 rules with none, the approval row times releases across two gateways, the
quota row counts what 64 callers on two gateways were granted, and every goal is checked."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.progress import Progress

from conclave.bench.core import BenchContext, measuring_settings
from conclave.bench.governance import governance_suite
from conclave.bench.governance.governance_suite import Sizes
from conclave.bench.governance.quota_exactness import CALLERS, LIMIT
from conclave.stack import EmbeddedStack
from gateway import Settings

pytestmark = pytest.mark.system  # starts stacks in its body


def test_the_governance_suite_measures_each_goal(redis_url: str, tmp_path: Path) -> None:
    settings = measuring_settings(Settings(redis_url=redis_url))
    with EmbeddedStack(settings, log_path=tmp_path / "stack-gateway.log") as stack:
        ctx = BenchContext(stack, quick=True, seed=7, out_dir=tmp_path, progress=Progress())
        result = governance_suite.measure(ctx, Sizes(2, 200, 30, 2, 0.2, 5, 2))
    policy, release, quotas = result.tables
    assert [row[0] for row in policy.rows] == [
        "Policies.decide p50 (us)", "gateway authorize stage, mean (us, its /metrics)",
        "gateway REST echo p50 (ms)", "gateway REST echo p99 (ms)",
        "gateway CPU a call at c=16 (us, median of rounds)",
        "gateway calls/s c=16 (mean of rounds)",
    ]  # fmt: skip
    for ruled, bare in (policy.rows[0][1:3], policy.rows[1][1:3]):
        assert ruled > bare > 0  # the rules were evaluated, in the loop and in the gateway
    assert all(row[1] > 0 and row[2] > 0 for row in policy.rows)
    [(_, n, p50, p99, most)] = release.rows
    assert n == 5 and 0 < p50 <= p99 <= most
    [(runs, fewest, most_granted, over, under, refused)] = quotas.rows
    assert (runs, fewest, most_granted, over, under) == (2, LIMIT, LIMIT, 0, 0)
    assert refused == 2 * CALLERS  # every caller's last call was refused, naming the quota
    assert [goal.name for goal in result.goals] == [
        "policy: 100 rules' decision in a loop, p50 (Policies.decide), added",
        "policy: 100 rules in a gateway's authorize stage, mean (its /metrics), added",
        "policy: 100 rules in a gateway's CPU time a call, median of rounds, added",
        "policy: gateway calls/s with 100 rules vs none",
        "approvals: approve on one replica -> the call answered on another (p99)",
        "quotas: over-grant in 2 runs of 64 callers on two replicas",
    ]
