"""The serving processes' GC tuning: what it sets, that 0 leaves Python's default alone, and the freeze
of start-up's objects."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from gateway.app.settings import Settings
from gateway.base.process_gc import freeze_startup, tune_gc


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


def test_freeze_leaves_what_is_alive_out_of_later_collections() -> None:
    gc.unfreeze()
    alive = {"kept": [object()]}  # a container alive at start-up
    try:
        freeze_startup()
        assert gc.get_freeze_count() > 0
        assert not any(obj is alive for generation in range(3) for obj in gc.get_objects(generation))
        young = {"later": []}  # built after the freeze: collected as before
        assert any(obj is young for obj in gc.get_objects(0))
    finally:
        gc.unfreeze()
    assert gc.get_freeze_count() == 0


def test_setting_is_validated() -> None:
    with pytest.raises(ValueError, match="gc_young_threshold"):
        Settings(gc_young_threshold=-1)
