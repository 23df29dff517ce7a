"""The history checker: proves from the history stream that a run was serializable.

It replays the commits in stream order (the order the store applied them) and reports:

- ``fork``: a commit wrote a key from a version that another commit had already moved on
  from (two writers built on the same version: a lost update);
- ``gap``: a commit wrote a key from a version no commit produced;
- ``bad_step``: a commit's new version is not its previous version + 1;
- ``stale_read``: a commit's read set, or a write's ``expected_version``, names a version that
  was no longer current when the commit was applied (what it decided on had gone stale);
- ``bad_op``: a commit recorded an op (increment, append, merge, add_to_set) that does not
  fit the value the history before it produced (or, in entries that record the op's result, a
  result that is not what the op makes of it); an op's result is otherwise replayed, and a
  wrong one shows as ``final_mismatch``;
- ``final_mismatch``: the store's final version or value of a key differs from what the
  sequential replay of the history produces.

No anomaly means the stream order is a serial order that explains every read and every write
and ends in the store's actual state. Each anomaly names the commits involved.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from redis.asyncio import Redis

from gateway.state.history import read_all_history
from gateway.state.keys import NamespaceKeys
from gateway.state.op_replay import json_equal, replay_op
from protocol import HistoryEntry


@dataclass(frozen=True)
class Anomaly:
    kind: str
    key: str
    commits: tuple[str, ...]
    message: str

    def __str__(self) -> str:
        return f"{self.kind:<15} key={self.key!r} commits={', '.join(self.commits)}: {self.message}"


@dataclass
class CheckReport:
    commits: int = 0
    keys: int = 0
    anomalies: list[Anomaly] = field(default_factory=list)

    @property
    def serializable(self) -> bool:
        return not self.anomalies

    def count(self, kind: str) -> int:
        return sum(1 for a in self.anomalies if a.kind == kind)


@dataclass
class _KeyState:
    version: int = 0
    value: Any = None
    writers: dict[int, str] = field(default_factory=dict)  # version -> commit that made it


def check_history(
    entries: Iterable[HistoryEntry], final: Mapping[str, tuple[int, Any]] | None = None
) -> CheckReport:
    """Check `entries` (in stream order); `final` is the store's key -> (version, value)."""
    report = CheckReport()
    keys: dict[str, _KeyState] = {}
    found = report.anomalies
    for entry in entries:
        report.commits += 1
        cid = entry.commit_id
        reads = [(key, read, "read version") for key, read in entry.read_set.items()]
        reads += [(k, v, "expected_version") for k, v in entry.expected_versions.items()]
        for key, read, what in reads:
            state = keys.setdefault(key, _KeyState())
            if read != state.version:
                writer = state.writers.get(state.version, "(initial)")
                found.append(
                    Anomaly(
                        "stale_read",
                        key,
                        (cid, writer),
                        f"{what} {read} but version {state.version} was current "
                        f"(written by {writer})",
                    )
                )
        for key, (previous, new) in entry.keys.items():
            state = keys.setdefault(key, _KeyState())
            if new != previous + 1:
                found.append(Anomaly("bad_step", key, (cid,), f"version {previous} -> {new}"))
            if previous < state.version:
                rival = state.writers.get(previous + 1, "(unknown)")
                found.append(
                    Anomaly(
                        "fork",
                        key,
                        (rival, cid),
                        f"both wrote on top of version {previous}; current was {state.version}",
                    )
                )
            elif previous > state.version:
                last = state.writers.get(state.version, "(initial)")
                found.append(
                    Anomaly(
                        "gap",
                        key,
                        (last, cid),
                        f"wrote from version {previous} but only {state.version} exists",
                    )
                )
            recorded = entry.values.get(key)
            if key in entry.ops:
                recorded, wrong = _replayed_op(entry, key, state.value)
                found.extend(wrong)
            state.version = new
            state.value = recorded
            state.writers[new] = cid
    report.keys = len(keys)
    for key, (version, value) in (final or {}).items():
        state = keys.get(key, _KeyState())
        if (version, value) != (state.version, state.value):
            found.append(
                Anomaly(
                    "final_mismatch",
                    key,
                    (state.writers.get(state.version, "(initial)"),),
                    f"store has version {version} value {json.dumps(value)[:60]}; replay gives "
                    f"version {state.version} value {json.dumps(state.value)[:60]}",
                )
            )
    return report


def _replayed_op(entry: HistoryEntry, key: str, before: Any) -> tuple[Any, list[Anomaly]]:
    """The value the entry's op makes of `before`, and what is wrong with it: the op does not
    fit, or the entry recorded a different result (entries record results only when written
    by a gateway before ops' results were left out of the history)."""
    applied = entry.ops[key]
    recorded = entry.values.get(key)
    try:
        expected = replay_op(applied.op, before, applied.value)
    except ValueError as exc:
        found = Anomaly("bad_op", key, (entry.commit_id,), f"{exc}, yet the commit applied it")
        return recorded, [found]
    if key not in entry.values or json_equal(expected, recorded):
        return expected, []
    return recorded, [
        Anomaly(
            "bad_op",
            key,
            (entry.commit_id,),
            f"{applied.op} {json.dumps(applied.value)[:40]} on {json.dumps(before)[:40]} gives "
            f"{json.dumps(expected)[:40]}; the commit recorded {json.dumps(recorded)[:40]}",
        )
    ]


async def final_state(
    redis: Redis, keys: NamespaceKeys, names: Iterable[str]
) -> dict[str, tuple[int, Any]]:
    """The store's current key -> (version, value) for `names`, read in one round trip."""
    ordered = sorted(set(names))
    async with redis.pipeline(transaction=True) as pipe:
        for name in ordered:
            pipe.hmget(keys.data(name), "ver", "val")
        rows = cast(list[list[str | None]], await pipe.execute())
    return {
        name: (int(ver or 0), json.loads(val) if val else None)
        for name, (ver, val) in zip(ordered, rows, strict=True)
    }


async def check_namespace_history(redis: Redis, keys: NamespaceKeys) -> CheckReport:
    """Read a namespace's whole history and its final state from Redis, and check them."""
    entries = await read_all_history(redis, keys)
    written = {key for entry in entries for key in entry.keys}
    return check_history(entries, await final_state(redis, keys, written))
