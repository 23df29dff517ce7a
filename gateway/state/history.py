"""The history stream: one entry per applied commit, in commit order.

The stream entry id is the commit id, so reading the stream in id order is replaying the
commits in the order the store applied them. The checker and `GET .../history` read it here.

The stream is bounded: each commit's `XADD` trims it to about `state_history_max` entries
(`MAXLEN ~`, so Redis drops whole nodes of the oldest entries and the length may run a node
over). A reader of old history gets only what is left: a page `after` a trimmed commit id
starts at the oldest entry still kept, with no marker of what was dropped, and the checker run
over a trimmed stream reports the first kept commits' versions as `gap`s (their predecessors
are gone). Check a run's history before it outgrows the bound.
"""

from __future__ import annotations

import json
from typing import cast

from redis.asyncio import Redis

from gateway.state.keys import NamespaceKeys
from protocol import HistoryEntry


def parse_entry(entry_id: str, fields: dict[str, str]) -> HistoryEntry:
    return HistoryEntry(
        commit_id=entry_id,
        agent=fields["agent"],
        session=fields["session"],
        keys={k: (int(v[0]), int(v[1])) for k, v in json.loads(fields["keys"]).items()},
        values=json.loads(fields["values"]),
        ops=json.loads(fields.get("ops", "{}")),
        read_set={k: int(v) for k, v in json.loads(fields["reads"]).items()},
        expected_versions={k: int(v) for k, v in json.loads(fields.get("expected", "{}")).items()},
        time_ms=int(fields["time"]),
    )


async def read_history(
    redis: Redis, keys: NamespaceKeys, *, after: str | None = None, limit: int = 100
) -> list[HistoryEntry]:
    """Up to `limit` entries after commit id `after` (from the start when None)."""
    start = f"({after}" if after else "-"
    rows = cast(
        list[tuple[str, dict[str, str]]],
        await redis.xrange(keys.history, min=start, max="+", count=limit),
    )
    return [parse_entry(entry_id, fields) for entry_id, fields in rows]


async def read_all_history(
    redis: Redis, keys: NamespaceKeys, *, page: int = 5000
) -> list[HistoryEntry]:
    entries: list[HistoryEntry] = []
    after: str | None = None
    while True:
        batch = await read_history(redis, keys, after=after, limit=page)
        entries.extend(batch)
        if len(batch) < page:
            return entries
        after = batch[-1].commit_id
