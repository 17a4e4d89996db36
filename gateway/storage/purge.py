"""Retention's shared loop: delete the rows past their retention a batch per transaction, once an hour.

Each retention (finished webhook jobs, settled sends, usage rows) names what it deletes; how it is
deleted in batches, how often, and what a failure does are the same for all, and live here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from gateway.storage.connections import Pool
from gateway.storage.errors import StoreUnavailable

log = logging.getLogger(__name__)

INTERVAL_S = 3600.0
BATCH = 5_000

#: Deletes at most ``batch`` rows older than ``days`` in one transaction; how many went.
Purge = Callable[[Pool, float, int], Awaitable[int]]


async def drain(purge: Purge, pool: Pool, days: float, batch: int = BATCH) -> int:
    """Run ``purge`` until a batch comes back short; how many rows went in all."""
    total = 0
    while True:
        gone = await purge(pool, days, batch)
        total += gone
        if gone < batch:
            return total
        await asyncio.sleep(0)  # let the actor's other loops run between batches


async def every(interval_s: float, stop: asyncio.Event, what: str, once: Callable[[], Awaitable[str | None]]) -> None:
    """Run ``once`` now and every ``interval_s`` until ``stop``; it returns a line to log, or None. A store
    that is down is a warning and a bug is logged: both are tried again at the next interval."""
    while not stop.is_set():
        try:
            done = await once()
            if done:
                log.info("%s: %s", what, done)
        except StoreUnavailable as exc:
            log.warning("%s: %s", what, exc)
        except Exception:  # a bug: logged, tried again at the next interval
            log.exception("%s pass failed", what)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval_s)
