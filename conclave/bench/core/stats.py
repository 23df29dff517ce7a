"""The statistics the bench suites report: a percentile (nearest rank over the sorted
samples) and a Wilson score interval for a rate (a share of chains completed)."""

from __future__ import annotations

import math
from collections.abc import Sequence

Z_95 = 1.959964  # the normal quantile of a two-sided 95% interval


def percentile(samples: Sequence[float], q: float) -> float:
    """The sample at rank `q` (0..1) of the sorted samples; 0.0 when there are none."""
    if not samples:
        return 0.0
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def wilson_interval(successes: int, trials: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of a rate, in percent: (low, high); (0, 100) without trials.
    Unlike the normal approximation it stays within 0..100 and holds at rates near 0 or 100
    with the hundred-odd trials a bench row has."""
    if trials <= 0:
        return 0.0, 100.0
    rate = successes / trials
    denominator = 1 + z * z / trials
    centre = (rate + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(rate * (1 - rate) / trials + z * z / (4 * trials * trials)) / denominator
    return 100 * max(0.0, centre - half), 100 * min(1.0, centre + half)
