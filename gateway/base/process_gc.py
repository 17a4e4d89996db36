"""Tuning of Python's cyclic garbage collector in a process that serves: an ingress replica, a gRPC
stream server, a webhook dispatcher.

The collector runs a young-generation pass every 700 net container allocations. A process serving 64
concurrent calls (or deliveries) allocates that many every few of them, and each pass walks every young
object still alive, which under load is the in-flight work's state. Raising the threshold makes those
passes rare without changing what is collected: reference counting frees nearly all of that garbage at
once, and cycles wait a little longer (figures in docs/performance.md).

The objects built during start-up (imported modules, pools, clients) live as long as the process. A
full collection walks them all every time (about 40 ms in a dispatcher's process); :func:`freeze_startup`
leaves them out of every later collection. Ray Serve does so for replicas after their constructor; a
Ray actor's loop calls it once it is set up.
"""

from __future__ import annotations

import gc

#: Python's own generation-1 and generation-2 thresholds are kept.
_OLDER_GENERATIONS = (10, 10)


def tune_gc(young_threshold: int) -> None:
    """Set the young-generation threshold; 0 leaves Python's default."""
    if young_threshold > 0:
        gc.set_threshold(young_threshold, *_OLDER_GENERATIONS)


def freeze_startup() -> None:
    """Collect start-up's garbage, then leave every object alive now out of later collections (they are
    still freed by reference counting; only a cycle among them would outlive its use)."""
    gc.collect()
    gc.freeze()
