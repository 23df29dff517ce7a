"""A gateway for the budgets and errors suites: the bench's Redis, plus the fault tools.

The suites' tools (`tools.harness.faults`) are not served by default, so each of these suites starts
one more gateway process on the bench stack's Redis and sandbox backend, with the settings
it needs, and clears the latency windows and breakers of the tools it uses first.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from redis import Redis

from conclave.bench.core import BenchContext
from conclave.stack import EmbeddedStack
from gateway.budgets import breaker_key, kill_overshoot_of, window_key

FAULT_MODULES = ("tools.builtin", "tools.harness.faults")
BENCH_TENANT = "bench"  # the suites' agents' tenant: its windows and breakers are cleared


@contextmanager
def fault_stack(
    ctx: BenchContext, tools: Iterable[str], **settings: Any
) -> Iterator[EmbeddedStack]:
    base = ctx.stack.settings
    assert base.redis_url is not None
    with Redis.from_url(base.redis_url) as redis:
        for tool in tools:
            redis.delete(
                window_key(BENCH_TENANT, tool),
                window_key(BENCH_TENANT, kill_overshoot_of(tool)),
                breaker_key(BENCH_TENANT, tool),
            )
    update = {"port": 0, "tool_modules": FAULT_MODULES, **settings}
    log_path = ctx.gateway_log("faults")
    with EmbeddedStack(base.model_copy(update=update), log_path=log_path) as stack:
        yield stack
