"""The benchmark's interval for a median: the order statistics and coverages of the binomial rule."""

from __future__ import annotations

import math
import random

import pytest

from bench.stats import median_interval


def test_five_rounds_give_smallest_to_largest_at_94_percent() -> None:
    interval = median_interval([0.975, 0.815, 0.839, 0.926, 0.757])
    assert interval is not None
    assert (interval.low, interval.high) == (0.757, 0.975)
    assert interval.confidence == pytest.approx(1 - 2 / 32)  # missed only if all five fall on one side


def test_the_narrowest_interval_that_reaches_the_confidence() -> None:
    values = [float(v) for v in range(1, 21)]
    random.Random(1).shuffle(values)
    interval = median_interval(values, confidence=0.90)
    assert interval is not None
    # 6th smallest to 6th largest: 95.9%; the 7th would give only 88.5%.
    assert (interval.low, interval.high) == (6.0, 15.0)
    assert interval.confidence == pytest.approx(1 - 2 * sum(math.comb(20, i) for i in range(6)) / 2**20)
    assert str(interval) == "6.000 – 15.000 (96% confidence)"


def test_too_few_values_say_what_they_can() -> None:
    interval = median_interval([3.0, 1.0, 2.0, 4.0], confidence=0.90)
    assert interval is not None
    assert (interval.low, interval.high, interval.confidence) == (1.0, 4.0, 0.875)
    assert median_interval([1.0]) is None
    assert median_interval([]) is None
