"""The history checker on hand-made histories: each anomaly found, with its commits."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.state import check_history
from protocol.state import HistoryEntry


def _entry(cid: str, keys: dict[str, tuple[int, int]], reads: dict[str, int] | None = None,
           values: dict[str, Any] | None = None) -> HistoryEntry:  # fmt: skip
    return HistoryEntry(
        commit_id=cid,
        agent="a",
        session="s",
        keys=keys,
        values=values if values is not None else {k: new for k, (_, new) in keys.items()},
        read_set=reads or {},
        time_ms=0,
    )


def test_a_serial_history_is_clean() -> None:
    entries = [
        _entry("1-0", {"x": (0, 1)}, {"x": 0}),
        _entry("2-0", {"y": (0, 1)}, {"x": 1}),
        _entry("3-0", {"x": (1, 2), "y": (1, 2)}, {"x": 1, "y": 1}),
    ]
    report = check_history(entries, final={"x": (2, 2), "y": (2, 2)})
    assert report.serializable and (report.commits, report.keys) == (3, 2)


def test_a_lost_update_is_a_fork_and_a_stale_read() -> None:
    entries = [
        _entry("1-0", {"c": (0, 1)}, {"c": 0}),
        _entry("2-0", {"c": (0, 1)}, {"c": 0}),  # built on the same version as 1-0
    ]
    report = check_history(entries)
    [stale] = [a for a in report.anomalies if a.kind == "stale_read"]
    [fork] = [a for a in report.anomalies if a.kind == "fork"]
    assert stale.commits == ("2-0", "1-0") and fork.commits == ("1-0", "2-0")


def test_write_skew_across_keys_is_a_stale_read() -> None:
    entries = [
        _entry("1-0", {"b": (0, 1)}, {"a": 0}),
        _entry("2-0", {"a": (0, 1)}, {"b": 0}),  # read b before 1-0 wrote it
    ]
    [anomaly] = check_history(entries).anomalies
    assert (anomaly.kind, anomaly.key, anomaly.commits) == ("stale_read", "b", ("2-0", "1-0"))


def test_gaps_bad_steps_and_final_mismatches_are_reported() -> None:
    entries = [
        _entry("1-0", {"x": (0, 1)}),
        _entry("2-0", {"x": (3, 4)}),
        _entry("3-0", {"y": (0, 2)}),
    ]
    report = check_history(entries, final={"x": (4, "other"), "z": (1, 1)})
    kinds = sorted(a.kind for a in report.anomalies)
    assert kinds == ["bad_step", "final_mismatch", "final_mismatch", "gap"]
    [gap] = [a for a in report.anomalies if a.kind == "gap"]
    assert gap.commits == ("1-0", "2-0") and "2-0" in str(gap)


def test_a_stale_expected_version_is_a_stale_read() -> None:
    """A commit script that skipped its expected_version check leaves a history whose versions
    chain up (each write moved on from the current version), so only the recorded
    expected_version shows the write was built on a version that had gone."""
    first = _entry("1-0", {"c": (0, 1)})
    first.expected_versions["c"] = 0
    second = _entry("2-0", {"c": (1, 2)})
    second.expected_versions["c"] = 0  # it expected version 0; 1 was current
    [anomaly] = check_history([first, second], final={"c": (2, 2)}).anomalies
    assert (anomaly.kind, anomaly.key, anomaly.commits) == ("stale_read", "c", ("2-0", "1-0"))
    assert "expected_version 0 but version 1 was current" in anomaly.message


@pytest.mark.anyio
async def test_the_store_records_each_writes_expected_version(agent: Any) -> None:
    alice = agent("alice")
    assert (await alice.put_namespace("exp")).status_code in (200, 201)
    ok = await alice.commit("exp", {"key": "c", "value": 1, "expected_version": 0})
    assert ok.status_code == 200, ok.text
    assert (await alice.commit("exp", {"key": "d", "value": 1})).status_code == 200
    first, second = await alice.history("exp")
    assert first["expected_versions"] == {"c": 0} and second["expected_versions"] == {}
