"""Pacing the answers to strangers: a client address's 401s come no faster than its bucket.

A refusal for a missing or bad token is cheap, but not free: its request is read, parsed,
routed and audited. A stranger sending them as fast as they are answered (issue 26: four
connections, ~800 a second) spent most of a core of the gateway that every tenant's calls
share. `StrangerPacing` holds one token bucket per client address (`per_s`, a burst of
twice that): a 401 is still answered, with its SERF envelope, but only once the address has a
token, and until then its connection waits, reading nothing more. So a stranger's refusals
cost the gateway at most `per_s` requests' work a second per address, however many it sends,
and the wait costs it nothing (no CPU, a descriptor the connection limits already bound).

Only 401 answers wait: a client with a good token is never paced here (its rate limits are
the budget stage's), and a client whose token expired gets its one 401 at once, from a full
bucket. Behind a proxy every client shares the proxy's address, so raise `per_s` there.
The buckets are per process (`gateway.pipeline.local_buckets`); at most 4,096 addresses are
kept (the least recently seen go, and an address seen again starts full).
"""

from __future__ import annotations

import anyio
from starlette.types import Message, Scope, Send

from gateway.pipeline import LocalBuckets


class StrangerPacing:
    def __init__(self, per_s: float) -> None:
        self.per_s = per_s
        self.burst = 2 * per_s
        # Per address; a bucket below zero: answers already promised ahead.
        self._buckets = LocalBuckets(per_s, self.burst)

    def delay_s(self, address: str) -> float:
        """Take one token of `address`'s bucket: how long its answer must wait for it."""
        return self._buckets.take(address, 1, owing=True)

    def pace(self, scope: Scope, send: Send) -> Send:
        """`send`, holding a 401 answer until the client's address has a token."""
        client = scope.get("client")
        address = client[0] if client else ""

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 401:
                delay = self.delay_s(address)
                if delay > 0:
                    await anyio.sleep(delay)
            await send(message)

        return sending
