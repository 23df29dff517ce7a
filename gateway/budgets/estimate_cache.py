"""The latency estimates a gateway process holds, so a call's grant costs the same however long
the tool's history is.

A tool's estimate (its Kaplan-Meier curve, p50 and p95) is made from every member of its
latency window: up to `latency_window_max` samples to parse and sort. Made on every call, a
call's cost grew with the window, so a gateway slowed as it served. Instead each process keeps
the estimate it last made of each (tenant, window), with the window's version it was made
from (`latency_window.version_key`, +1 a sample written). The admission script returns every
window's version, and a window's members only when `fresh` said the estimate held is stale:

- the window has moved by at least `refresh_share` of the samples the estimate was made from
  (one sample, while it had fewer than ten), or
- it has moved at all and the estimate is `refresh_ms` old, or
- the window is gone (version 0) or was never read here.

So a window of n samples is parsed at most once every n/10 calls that read it (about ten
members a call, whatever n is) or once a second, and an estimate is never older than one
tenth of its window's samples or than a second: well inside the window's own sampling error.
While one call of the process is reading a window's members, the others keep the estimate held
(`asked`), so a burst of concurrent calls reads the window once, not once each; a read whose
call never came back (refused, or failed) is asked again after `refresh_ms`.

The holder is bounded (`max_entries`, least recently used out), so a stream of new tenants or
tools costs it memory up to the bound, never more. A held estimate is made without the tool's
declared timeout, which depends on the call (a caller may ask for less): while the window has
fewer than its minimum samples, the call's own declared timeout stands in for both quantiles,
as `LatencyWindow.summarize` would have said.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, replace

from gateway.budgets.latency_window import LatencyEstimate, LatencyWindow, WindowRead

REFRESH_SHARE = 0.1
REFRESH_MS = 1_000
MAX_ENTRIES = 10_000


@dataclass
class _Held:
    estimate: LatencyEstimate  # made with a declared timeout of 0 (see `_declared`)
    version: int  # the window's version it was made from
    made_at: float  # time.monotonic()
    seen: int  # the newest version an admission reply showed since
    asked_at: float | None = None  # a call of this process is reading the members


class EstimateCache:
    def __init__(
        self,
        window: LatencyWindow,
        *,
        refresh_share: float = REFRESH_SHARE,
        refresh_ms: int = REFRESH_MS,
        max_entries: int = MAX_ENTRIES,
    ) -> None:
        self.window = window
        self.refresh_share = refresh_share
        self.refresh_s = refresh_ms / 1000
        self.max_entries = max_entries
        self._held: OrderedDict[tuple[str, str], _Held] = OrderedDict()
        self.members_parsed = 0  # every window member this process parsed, for the bench

    def fresh(self, tenant: str, name: str) -> bool:
        """Whether the estimate held of `tenant`'s window `name` will do for the next call (so
        only the window's version need be read); False asks the call to read its members,
        and the process's other calls keep the held one meanwhile."""
        held = self._held.get((tenant, name))
        if held is None:
            return False
        self._held.move_to_end((tenant, name))
        now = time.monotonic()
        if held.asked_at is not None and now - held.asked_at < self.refresh_s:
            return True
        moved = held.seen - held.version
        if moved == 0:
            return True
        threshold = max(1, int(held.estimate.samples * self.refresh_share))
        if moved < 0 or moved >= threshold or now - held.made_at >= self.refresh_s:
            held.asked_at = now
            return False
        return True

    def settle(self, tenant: str, name: str, read: WindowRead, declared_ms: int) -> LatencyEstimate:
        """The estimate for a call, from the window as its admission read it: made from the
        members when they were read, else the one held."""
        key = (tenant, name)
        held = self._held.get(key)
        if read.members is None:
            if held is None:  # pushed out since `fresh` (the bound): the declared timeout
                return LatencyEstimate(name, declared_ms, declared_ms, 0, 0, "declared")
            if read.version == 0 or read.version > held.seen:
                held.seen = read.version
            return _declared(held.estimate, declared_ms)
        if held is not None and held.version == read.version:
            held.asked_at = None  # another call made it from the same version meanwhile
            return _declared(held.estimate, declared_ms)
        self.members_parsed += len(read.members)
        estimate = self.window.summarize(name, read.members, 0)
        self._held[key] = _Held(estimate, read.version, time.monotonic(), read.version)
        self._held.move_to_end(key)
        while len(self._held) > self.max_entries:
            self._held.popitem(last=False)
        return _declared(estimate, declared_ms)

    def __len__(self) -> int:
        return len(self._held)


def _declared(estimate: LatencyEstimate, declared_ms: int) -> LatencyEstimate:
    """`estimate` for a call whose tool declares `declared_ms`: as is once observed."""
    if estimate.observed:
        return estimate
    return replace(estimate, p50_ms=declared_ms, p95_ms=declared_ms)
