"""Summary statistics of repeated benchmark runs: quartiles, and how well a median is known.

Each replica process runs the same code at its own speed (``bench/unmetered.py``), so rounds on new
processes are the independent draws of a run, and a median of a few of them is uncertain by more
than the few percent a target is often decided by. :func:`median_interval` says by how much, with
the distribution-free interval for a median (two order statistics, coverage from the binomial
distribution): no assumption about how the rounds are spread, and exact for any number of them.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass


def quartiles(values: list[float]) -> tuple[float, float]:
    q1, _, q3 = statistics.quantiles(values, n=4) if len(values) > 1 else (values[0],) * 3
    return q1, q3


@dataclass(frozen=True)
class Interval:
    low: float
    high: float
    confidence: float  # that it holds the true median: at least the one asked for, unless there were too few values

    def __str__(self) -> str:
        return f"{self.low:.3f} – {self.high:.3f} ({self.confidence:.0%} confidence)"


def median_interval(values: list[float], confidence: float = 0.90) -> Interval | None:
    """The narrowest interval between two order statistics that holds the median of the distribution
    ``values`` were drawn from with at least ``confidence``; with too few values for that, the widest
    (smallest to largest) with the confidence it has. None for fewer than two values."""
    n = len(values)
    if n < 2:
        return None
    ordered = sorted(values)
    # With the k-th smallest and k-th largest as bounds, the median is missed when fewer than k of the
    # n values fall on one side of it: each value does so with probability 1/2.
    best = 1
    for k in range(2, n // 2 + 1):
        if _coverage(n, k) < confidence:
            break
        best = k
    return Interval(ordered[best - 1], ordered[n - best], _coverage(n, best))


def _coverage(n: int, k: int) -> float:
    missed_one_side = sum(math.comb(n, i) for i in range(k)) / (1 << n)
    return 1 - 2 * missed_one_side
