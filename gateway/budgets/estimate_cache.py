"""The latency estimates a gateway process holds, so a call's grant costs the same however long
the tool's history is.

A tool's estimate (its Kaplan-Meier curve, p50 and p95) is made from every member of its
latency window: up to `latency_window_max` samples to parse and sort. Made on every call, a
call's cost grew with the window, so a gateway slowed as it served. Instead each process keeps
the estimate it last made of each (tenant, window), with the window's version it was made
from (`latency_window.version_key`, +1 a sample written). A call hands the admission script
that version and how far the window may have moved past it (`ask`); the script reads the
window's current version and returns its members only when it moved that far:

- by `refresh_share` of the samples the estimate was made from (one sample while it had
  fewer than ten), or
- at all, once the estimate is `refresh_ms` old, or
- whatever the version, when this process holds no estimate of the window yet;
- and when the window lapsed or was made anew (its version went back).

One call of a process at a time asks for the members (`ask`); the others ask with a mark no
window reaches, until it (or any call) settles: under load a round trip carries many calls'
admissions, and each would have read the whole window where one read is enough (at 2,900
calls/s a third of the calls read 200 members each before, one in thirty after).

So a window of n samples is parsed about once every n/10 calls that read it (about ten
members a call, whatever n is) or once a second, and a grant never rests on an estimate that
misses more than a tenth of its window's samples, and those recorded during one admission
round trip (at most the calls in flight), or a second of them: inside the window's own
sampling error. The decision is the script's, on the version as it is at the call, so a tool
called again after a quiet spell is read anew at once. A read that crosses another's (its
asker settled first) makes the estimate once; the others keep it (`settle`). One
difference from reading every call: in a window nobody writes to (a planned tool not called
for a while), samples past `latency_window_s` leave the held estimate when the window lapses
as a whole (its version goes to 0), not one by one.

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
_NEVER = 1 << 62  # a mark no window moves past: its members are not read


@dataclass(frozen=True)
class _Held:
    estimate: LatencyEstimate  # made with a declared timeout of 0 (see `_declared`)
    version: int  # the window's version it was made from
    made_at: float  # time.monotonic()


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
        self._reading: dict[tuple[str, str], float] = {}  # asked to read at (monotonic)
        self.members_parsed = 0  # every window member this process parsed, for the bench

    def ask(self, tenant: str, name: str) -> tuple[int, int]:
        """What a call hands the admission script of `tenant`'s window `name`: the version of
        the estimate held, and how far the window may have moved past it before the script
        returns its members (0: return them whatever the version). While another call's ask
        may bring the members back, this one asks for none: under load a round trip carries
        many calls' admissions, and each would read the whole window where one is enough."""
        key = (tenant, name)
        held = self._held.get(key)
        if held is None:
            return 0, 0
        self._held.move_to_end(key)
        now = time.monotonic()
        reading = self._reading.get(key)
        if reading is not None and now - reading < self.refresh_s:
            return held.version, _NEVER
        self._reading[key] = now
        return held.version, self._mark(held, now)

    def _mark(self, held: _Held, now: float) -> int:
        if now - held.made_at >= self.refresh_s:
            return 1
        return max(1, int(held.estimate.samples * self.refresh_share))

    def settle(self, tenant: str, name: str, read: WindowRead, declared_ms: int) -> LatencyEstimate:
        """The estimate for a call, from the window as its admission read it: made from the
        members when they were read (unless another call just made it from nearly the same
        window), else the one held."""
        key = (tenant, name)
        held = self._held.get(key)
        now = time.monotonic()
        # The first call to settle is (replies come in order) the one that asked to read: the
        # next ask may read again. (A reader refused before it settles lapses after refresh_s.)
        self._reading.pop(key, None)
        # A read that moved less than the mark since the estimate held: another call of this
        # process made it meanwhile (or, version going back but not to 0, from a later read).
        if held is not None and (
            read.members is None
            or (read.version != 0 and read.version - held.version < self._mark(held, now))
        ):
            return _declared(held.estimate, declared_ms)
        if read.members is None:  # pushed out since `ask` (the bound): the declared timeout
            return LatencyEstimate(name, declared_ms, declared_ms, 0, 0, "declared")
        self.members_parsed += len(read.members)
        estimate = self.window.summarize(name, read.members, 0)
        self._held[key] = _Held(estimate, read.version, now)
        self._held.move_to_end(key)
        while len(self._held) > self.max_entries:
            evicted, _ = self._held.popitem(last=False)
            self._reading.pop(evicted, None)  # bounded with what is held
        return _declared(estimate, declared_ms)

    def __len__(self) -> int:
        return len(self._held)


def _declared(estimate: LatencyEstimate, declared_ms: int) -> LatencyEstimate:
    """`estimate` for a call whose tool declares `declared_ms`: as is once observed."""
    if estimate.observed:
        return estimate
    return replace(estimate, p50_ms=declared_ms, p95_ms=declared_ms)
