"""Test tools with injected latency and failure modes, for tests and the benchmarks.

Not served unless `tools.harness.faults` is listed in `CONCLAVE_TOOL_MODULES`. They run in the
sandbox like any tool. Latency is drawn from a seeded heavy-tailed distribution, so a caller
that knows the seed knows the duration; failure modes that depend on earlier calls (fail N
times, then succeed; a rate limit; a version) keep their state in small files under the
sandbox workspace, since every call runs in a fresh child process.
"""

from __future__ import annotations

import math
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Literal

from pydantic import Field

from protocol import ResourceIntent, ToolContext
from tools.registry import tool
from tools.tool_exceptions import (
    ToolConflict,
    ToolPermissionDenied,
    ToolRateLimited,
    ToolUnavailable,
)

Distribution = Literal["lognormal", "pareto", "fixed"]
MAX_SLEEP_MS = 60_000.0
_SMALL = ResourceIntent(memory_mb=64, cpu_seconds=2, timeout_ms=5_000)


def sample_latency_ms(
    distribution: Distribution, median_ms: float, shape: float, seed: int
) -> float:
    """A duration with the given median: lognormal (shape = sigma) or Pareto (shape = alpha)."""
    rng = random.Random(seed)
    if distribution == "lognormal":
        value = median_ms * math.exp(shape * rng.gauss(0.0, 1.0))
    elif distribution == "pareto":
        value = median_ms / 2 ** (1 / shape) * rng.paretovariate(shape)
    else:
        value = median_ms
    return min(MAX_SLEEP_MS, value)


@tool(idempotent=True, intent=ResourceIntent(memory_mb=64, cpu_seconds=2, timeout_ms=60_000))
def heavy_tailed_sleep(
    distribution: Distribution, median_ms: float, shape: float = 1.0, seed: int = 0
) -> float:
    """Sleep for a seeded heavy-tailed duration; returns the milliseconds slept."""
    slept = sample_latency_ms(distribution, median_ms, shape, seed)
    time.sleep(slept / 1000)
    return slept


def _fault_file(key: str) -> Path:
    root = Path(os.environ.get("CONCLAVE_WORKSPACE") or tempfile.gettempdir())
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in key)
    path = root / ".conclave-faults" / safe
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _count_call(key: str) -> int:
    """This call's number (1-based) for the key; appends are atomic, so calls never collide."""
    path = _fault_file(key)
    with path.open("ab") as handle:
        handle.write(b".")
    return path.stat().st_size


@tool(intent=_SMALL)
def flaky(key: str, failures: int = 2) -> int:
    """Fail with an unavailable upstream for the first `failures` calls with this key."""
    attempt = _count_call(f"flaky-{key}")
    if attempt <= failures:
        raise ToolUnavailable(f"upstream unavailable (call {attempt} of {failures} failing)")
    return attempt


@tool(intent=_SMALL)
def rate_limited(key: str, limit: int = 1, window_ms: int = 200) -> int:
    """Allow `limit` calls per `window_ms` for this key; refuse the rest as rate-limited."""
    path = _fault_file(f"rate-{key}")
    now = time.time() * 1000
    recent = [float(t) for t in path.read_text().split()] if path.exists() else []
    recent = [t for t in recent if now - t < window_ms]
    if len(recent) >= limit:
        raise ToolRateLimited(f"{limit} calls per {window_ms} ms; wait")
    path.write_text(" ".join(f"{t:.3f}" for t in [*recent, now]))
    return len(recent) + 1


@tool(intent=_SMALL)
def strict_args(count: int = Field(ge=1, le=100), unit: Literal["ms", "s"] = "ms") -> str:
    """Accept only 1 <= count <= 100: wrong arguments are refused before anything runs."""
    return f"{count} {unit}"


@tool(intent=_SMALL)
def forbidden(path: str) -> str:
    """Always refuse: the caller may not touch this path."""
    raise ToolPermissionDenied(f"{path!r} is not yours to read")


@tool(intent=_SMALL)
def version_of(key: str) -> int:
    """The current version of a versioned value (0 if never written)."""
    path = _fault_file(f"version-{key}")
    return int(path.read_text() or 0) if path.exists() else 0


@tool(intent=_SMALL)
def versioned_put(key: str, expected_version: int) -> int:
    """Write if the value is still at `expected_version`; returns the new version."""
    current = version_of(key)
    if current != expected_version:
        raise ToolConflict(f"version is {current}, not {expected_version}: re-read and retry")
    _fault_file(f"version-{key}").write_text(str(current + 1))
    return current + 1


@tool(intent=_SMALL)
def broken(reason: str = "it is broken") -> str:
    """Always fail with an ordinary exception: nothing the caller does will help."""
    raise RuntimeError(reason)


# Four tools for chains under a deadline, each with its own latency profile, so each has its
# own latency window at the gateway: (distribution, median ms, shape).
CHAIN_PROFILES: dict[str, tuple[Distribution, float, float]] = {
    "chain_search": ("lognormal", 60.0, 0.9),
    "chain_fetch": ("pareto", 100.0, 1.3),
    "chain_parse": ("lognormal", 32.0, 0.6),
    "chain_rank": ("pareto", 140.0, 1.6),
}
_CHAIN = ResourceIntent(memory_mb=64, cpu_seconds=2, timeout_ms=60_000)  # the common default


def hedge_seed(seed: int) -> int:
    """The seed a hedged copy of a call (the gateway's second attempt) draws its latency
    from: anew, as a second attempt of a real tool would, yet reproducibly."""
    return (seed * 31 + 1_000_003) % 2**31


def _drawn_seed(seed: int, context: ToolContext | None) -> int:
    return hedge_seed(seed) if context is not None and context.hedge else seed


def _chain_step(name: str, seed: int, context: ToolContext | None = None) -> float:
    seed = _drawn_seed(seed, context)
    distribution, median_ms, shape = CHAIN_PROFILES[name]
    slept = sample_latency_ms(distribution, median_ms, shape, seed)
    time.sleep(slept / 1000)
    return slept


@tool(idempotent=True, intent=_CHAIN)
def chain_search(seed: int, context: ToolContext | None = None) -> float:
    """A search step: lognormal latency, median 60 ms."""
    return _chain_step("chain_search", seed, context)


@tool(idempotent=True, intent=_CHAIN)
def chain_fetch(seed: int, context: ToolContext | None = None) -> float:
    """A fetch step: Pareto latency (alpha 1.3), median 100 ms."""
    return _chain_step("chain_fetch", seed, context)


@tool(idempotent=True, intent=_CHAIN)
def chain_parse(seed: int, context: ToolContext | None = None) -> float:
    """A parse step: lognormal latency, median 32 ms."""
    return _chain_step("chain_parse", seed, context)


@tool(idempotent=True, intent=_CHAIN)
def chain_rank(seed: int, context: ToolContext | None = None) -> float:
    """A rank step: Pareto latency (alpha 1.6), median 140 ms."""
    return _chain_step("chain_rank", seed, context)


# The same four steps, except that a share of calls never answer (a hung upstream): such a
# call sleeps past any grant, so only a timeout ends it. Whether attempt k of a step hangs is
# drawn from its seed too, so every policy (and the offline optimum) meets the same hangs.
HANG_SHARE = 0.1
HANG_PROFILES: dict[str, str] = {
    "chain_hang_search": "chain_search",
    "chain_hang_fetch": "chain_fetch",
    "chain_hang_parse": "chain_parse",
    "chain_hang_rank": "chain_rank",
}


def hangs(seed: int) -> bool:
    """Whether the call with this seed never answers (a share HANG_SHARE of seeds)."""
    return random.Random(seed * 2 + 1).random() < HANG_SHARE


def chain_latency_ms(name: str, seed: int) -> float:
    """How long chain tool `name` takes with `seed` (MAX_SLEEP_MS: it hangs)."""
    if name in HANG_PROFILES:
        if hangs(seed):
            return MAX_SLEEP_MS
        name = HANG_PROFILES[name]
    distribution, median_ms, shape = CHAIN_PROFILES[name]
    return sample_latency_ms(distribution, median_ms, shape, seed)


def _hang_prone_step(name: str, seed: int, context: ToolContext | None) -> float:
    slept = chain_latency_ms(name, _drawn_seed(seed, context))
    time.sleep(slept / 1000)
    return slept


@tool(idempotent=True, intent=_CHAIN)
def chain_hang_search(seed: int, context: ToolContext | None = None) -> float:
    """chain_search, except that one call in ten never answers."""
    return _hang_prone_step("chain_hang_search", seed, context)


@tool(idempotent=True, intent=_CHAIN)
def chain_hang_fetch(seed: int, context: ToolContext | None = None) -> float:
    """chain_fetch, except that one call in ten never answers."""
    return _hang_prone_step("chain_hang_fetch", seed, context)


@tool(idempotent=True, intent=_CHAIN)
def chain_hang_parse(seed: int, context: ToolContext | None = None) -> float:
    """chain_parse, except that one call in ten never answers."""
    return _hang_prone_step("chain_hang_parse", seed, context)


@tool(idempotent=True, intent=_CHAIN)
def chain_hang_rank(seed: int, context: ToolContext | None = None) -> float:
    """chain_rank, except that one call in ten never answers."""
    return _hang_prone_step("chain_hang_rank", seed, context)
