"""The replica process's GC tuning: what it sets, and that 0 leaves Python's default alone."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from gateway.runtime.replica_process import tune_gc
from gateway.settings import Settings


@pytest.fixture
def restore_gc() -> Iterator[tuple[int, int, int]]:
    before = gc.get_threshold()
    yield before
    gc.set_threshold(*before)


def test_young_threshold_is_raised_and_older_generations_kept(restore_gc: tuple[int, int, int]) -> None:
    tune_gc(Settings().gc_young_threshold)
    assert gc.get_threshold() == (50_000, 10, 10)


def test_zero_leaves_the_thresholds_alone(restore_gc: tuple[int, int, int]) -> None:
    tune_gc(0)
    assert gc.get_threshold() == restore_gc


def test_setting_is_validated() -> None:
    with pytest.raises(ValueError, match="gc_young_threshold"):
        Settings(gc_young_threshold=-1)
