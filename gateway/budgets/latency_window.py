"""Per-(tenant, tool) latency windows in Redis, shared by every gateway replica.

Each tenant's calls of a tool have one sorted set (one tenant's calls never move another
tenant's grants; the tenant is the key's Redis Cluster hash tag, so all of a tenant's
budget keys live on one slot), and so do the tenant's kill overshoots of that tool
(`kill_overshoot_of`). Each set (score: when the call ended) holding its recent durations; a
write trims it by age (`window_s`) and by count (`max_samples`) in the same transaction, so
the window stays bounded however busy the tool is. A call the sandbox killed at its
allocation is recorded *censored*: its true duration is only known to be at least the
allocation. Quantiles come from the Kaplan-Meier estimator, which treats censored samples as
lower bounds instead of pretending the call finished when it was killed; where censoring
hides the quantile, the largest sample stands in as a lower bound.

Until a tool has `min_samples` samples its declared timeout (`ToolSpec.intent.timeout_ms`)
stands in for both quantiles, and the estimate says so (`source="declared"`).

Each window has a version beside it (`version_key`), moved by every sample written, so a
gateway can tell whether the estimate it holds is still the window's without reading the
window (`gateway.budgets.estimate_cache`).
"""

from __future__ import annotations

import random
import time
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from redis.asyncio import Redis

from gateway.redis_io import lua_script

KEY_PREFIX = "conclave:lat:"
# The prefix of a pseudo-tool (tool names start with a letter or digit): how late a tool's
# killed calls answered past their limit (the grant, or the sandbox's deadline), gateway and
# sandbox together. The allocator keeps its p95 back.
KILL_OVERSHOOT = "_kill_overshoot"


def kill_overshoot_of(tool: str) -> str:
    """The window (pseudo-tool) of how late `tool`'s killed calls answered."""
    return f"{KILL_OVERSHOOT}:{tool}"


@dataclass(frozen=True)
class LatencySample:
    duration_ms: float
    censored: bool  # killed at duration_ms: the real duration is at least this


@dataclass(frozen=True)
class LatencyEstimate:
    tool: str
    p50_ms: float
    p95_ms: float
    samples: int
    censored: int
    source: Literal["observed", "declared"]
    # The Kaplan-Meier curve: (duration, P(a call finishes within it)) at each finished
    # sample, ascending; empty while the declared timeout stands in.
    curve: tuple[tuple[float, float], ...] = ()

    @property
    def observed(self) -> bool:
        return self.source == "observed"

    def finish_probability(self, within_ms: float) -> float:
        """P(a call finishes within `within_ms`), from the window (0 without samples)."""
        index = bisect_right(self.curve, (within_ms, 2.0))
        return self.curve[index - 1][1] if index else 0.0

    def quantile(self, q: float) -> float:
        """The q-quantile from the window, as a duration a call can finish in: where
        censoring hides it (more than 1 - q of the calls were killed first, e.g. a tool
        that hung), the longest a call was seen to finish in, and 0 when none finished.
        Never the kills' lower bound: after a run of hung calls that would say the tool
        needs longer than any grant, and refuse every budgeted call until the window ages
        out (nothing could finish under a budget to show otherwise)."""
        # The curve's finish chances only rise: a bisection, not a walk of up to the window's
        # every sample on every call that weighs a hedge.
        index = bisect_left(self.curve, q - 1e-12, key=_finished)
        if index < len(self.curve):
            return self.curve[index][0]
        if self.curve or self.censored >= self.samples:
            return self.curve[-1][0] if self.curve else 0.0
        return self.p50_ms if q <= 0.5 else self.p95_ms  # a summary given without its curve


def _finished(point: tuple[float, float]) -> float:
    return point[1]


def finish_curve(samples: Sequence[LatencySample]) -> tuple[tuple[float, float], ...]:
    """Kaplan-Meier with right-censored samples (a killed call took at least its grant)."""
    # At equal durations a finished call counts before a killed one, the usual KM convention.
    ordered = sorted(samples, key=lambda s: (s.duration_ms, s.censored))
    at_risk = len(ordered)
    survival = 1.0
    curve: list[tuple[float, float]] = []
    for sample in ordered:
        if not sample.censored:
            survival *= 1.0 - 1.0 / at_risk
            curve.append((sample.duration_ms, 1.0 - survival))
        at_risk -= 1
    return tuple(curve)


def censored_quantile(samples: Sequence[LatencySample], q: float) -> float:
    """The q-quantile of durations with right-censored samples (Kaplan-Meier).

    Samples must be non-empty. When censoring keeps the survival curve above 1 - q, the
    quantile lies beyond every observation: the largest sample is returned as a lower bound.
    """
    return _quantile(finish_curve(samples), q, max(s.duration_ms for s in samples))


def _quantile(curve: Sequence[tuple[float, float]], q: float, longest_ms: float) -> float:
    for duration, finished in curve:
        if finished >= q - 1e-12:
            return duration
    return longest_ms


_RECORD = lua_script("gateway.budgets", "record_sample", "latency_record")
VERSION_PREFIX = "conclave:latv:"


def window_key(tenant: str, tool: str) -> str:
    return f"{KEY_PREFIX}{{{tenant}}}:{tool}"  # hash tag: a tenant's budget keys share a slot


def version_key(tenant: str, tool: str) -> str:
    """The window's version: +1 a sample, lapsing with the window (`record_sample.lua`)."""
    return f"{VERSION_PREFIX}{{{tenant}}}:{tool}"


@dataclass(frozen=True)
class WindowRead:
    """A window as the admission script read it: its version (0: there is none) and, when
    they were asked for, its members."""

    version: int
    members: Sequence[str] | None = None


def sample_member(sample: LatencySample) -> str:
    # Unique per call, so two calls with the same duration are two samples.
    # `random`, not uuid4: uniqueness is all it needs, and uuid4 reads the OS's entropy.
    unique = f"{random.getrandbits(48):012x}"
    return f"{sample.duration_ms:.3f}|{'c' if sample.censored else 'o'}|{unique}"


def _parse(member: str) -> LatencySample:
    duration, flag, _ = member.split("|", 2)
    return LatencySample(float(duration), flag == "c")


class LatencyWindow:
    """Records call durations per (tenant, tool) and answers p50/p95 from the recent window."""

    def __init__(
        self,
        redis: Redis,
        *,
        window_s: float = 600.0,
        max_samples: int = 200,
        min_samples: int = 5,
    ) -> None:
        self._redis = redis
        self.window_ms = int(window_s * 1000)
        self.max_samples = max_samples
        self.min_samples = min_samples
        self._record = redis.register_script(_RECORD.text)

    @property
    def redis(self) -> Redis:
        return self._redis

    async def record(
        self,
        tenant: str,
        tool: str,
        duration_ms: float,
        *,
        censored: bool = False,
        now_ms: int | None = None,
    ) -> None:
        now = now_ms if now_ms is not None else int(time.time() * 1000)
        member = sample_member(LatencySample(max(0.0, duration_ms), censored))
        await self._record(
            keys=_RECORD.keys(window=window_key(tenant, tool), version=version_key(tenant, tool)),
            args=_RECORD.argv(
                member=member, now_ms=now, window_ms=self.window_ms, max_samples=self.max_samples
            ),
        )

    async def samples(
        self, tenant: str, tool: str, *, now_ms: int | None = None
    ) -> list[LatencySample]:
        now = now_ms if now_ms is not None else int(time.time() * 1000)
        members = await self._redis.zrangebyscore(
            window_key(tenant, tool), f"({now - self.window_ms}", "+inf"
        )
        return [_parse(str(m)) for m in members]

    async def estimate(
        self, tenant: str, tool: str, declared_timeout_ms: int, *, now_ms: int | None = None
    ) -> LatencyEstimate:
        found = await self.estimates(tenant, {tool: declared_timeout_ms}, now_ms=now_ms)
        return found[tool]

    async def estimates(
        self, tenant: str, declared: Mapping[str, int], *, now_ms: int | None = None
    ) -> dict[str, LatencyEstimate]:
        """A tenant's estimates for several tools (a call and its plan) in one round trip."""
        now = now_ms if now_ms is not None else int(time.time() * 1000)
        tools = list(declared)
        async with self._redis.pipeline(transaction=False) as pipe:
            for tool in tools:
                pipe.zrangebyscore(window_key(tenant, tool), f"({now - self.window_ms}", "+inf")
            answers: list[list[str]] = await pipe.execute()
        return {
            tool: self.summarize(tool, members, declared[tool])
            for tool, members in zip(tools, answers, strict=True)
        }

    def summarize(self, tool: str, members: Iterable[str], declared_ms: int) -> LatencyEstimate:
        """The estimate from a window's members as read (here, or by the admission script)."""
        found = [_parse(str(m)) for m in members]
        censored = sum(1 for s in found if s.censored)
        if len(found) < self.min_samples:
            return LatencyEstimate(tool, declared_ms, declared_ms, len(found), censored, "declared")
        curve = finish_curve(found)
        longest = max(s.duration_ms for s in found)
        return LatencyEstimate(
            tool,
            _quantile(curve, 0.50, longest),
            _quantile(curve, 0.95, longest),
            len(found),
            censored,
            "observed",
            curve,
        )
