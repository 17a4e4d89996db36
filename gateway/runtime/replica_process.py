"""Tuning of the process an ingress replica runs in (called from the replica's constructor).

Python's cyclic garbage collector runs a young-generation pass every 700 net container allocations.
A replica serving 64 concurrent calls allocates that many every few calls, and each pass walks every
young object still alive, which under load is the in-flight calls' state. Raising the threshold
makes those passes rare without changing what is collected: reference counting frees nearly all
request garbage at once, and cycles wait a little longer (figures in docs/performance.md). Ray
Serve freezes the objects built during start-up after the constructor (``gc.freeze``), so they are
not walked either way.
"""

from __future__ import annotations

import gc

#: Python's own generation-1 and generation-2 thresholds are kept.
_OLDER_GENERATIONS = (10, 10)


def tune_gc(young_threshold: int) -> None:
    """Set the young-generation threshold; 0 leaves Python's default."""
    if young_threshold > 0:
        gc.set_threshold(young_threshold, *_OLDER_GENERATIONS)
