"""`LocalBuckets`: token buckets by key, held in this process (not in Redis).

For what one gateway process shares out of its own resources, so per process is the right
scope: its CPU for parsing large bodies (`body_rate`, per tenant) and for answering strangers
(`gateway.http.connections`, per client address). Each bucket refills at `per_s` up to
`burst`; at most `max_keys` are kept (the least recently seen go, and a key seen again starts
full), so the keys a caller can make cost a bounded amount of memory.
"""

from __future__ import annotations

import time
from collections import OrderedDict

MAX_KEYS = 4096


class LocalBuckets:
    def __init__(self, per_s: float, burst: float, max_keys: int = MAX_KEYS) -> None:
        self.per_s = per_s
        self.burst = burst
        self.max_keys = max_keys
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # tokens, when

    def take(self, key: str, cost: float, *, owing: bool = False) -> float:
        """Take `cost` from `key`'s bucket: the seconds until the bucket holds it (0: it did).
        A bucket short of `cost` is left as it was, unless `owing`: then it goes below zero,
        and what it owes is paid back by the refill first (answers promised ahead)."""
        now = time.monotonic()
        tokens, then = self._buckets.pop(key, (self.burst, now))
        tokens = min(self.burst, tokens + (now - then) * self.per_s)
        short = cost - tokens
        if short <= 0 or owing:
            tokens -= cost
        self._buckets[key] = (tokens, now)
        if len(self._buckets) > self.max_keys:
            self._buckets.popitem(last=False)
        return max(0.0, short) / self.per_s
