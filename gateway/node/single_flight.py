"""One read of the node for every caller that wants it at once: a stale cached value (the SOL/USD rate
read for ``/pricing`` and for every trade build) is read again once however many callers find it stale,
instead of once per caller.

Hand-written: a dozen lines on an asyncio future, where a caching library (none is a dependency) would
bring its own cache. :class:`Fresh` is the cache the node reads share: the SOL/USD rate
(:class:`gateway.trades.sol_usd.CachedRate`) and the recent blockhash (:class:`gateway.x402.blockhash.RecentBlockhash`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class SingleFlight(Generic[T]):
    """``fetch`` run once for every caller that asks while it runs: they all get its answer (or its
    error). A caller that goes away does not cancel it for the others."""

    def __init__(self, fetch: Callable[[], Awaitable[T]]) -> None:
        self._fetch = fetch
        self._running: asyncio.Future[T] | None = None
        self.runs = 0  # how many times ``fetch`` was started

    async def __call__(self) -> T:
        running = self._running
        if running is None:
            self.runs += 1
            running = self._running = asyncio.ensure_future(self._fetch())
            running.add_done_callback(self._done)
        return await asyncio.shield(running)

    def _done(self, finished: asyncio.Future[T]) -> None:
        if self._running is finished:
            self._running = None
        if not finished.cancelled():
            finished.exception()  # retrieved: an error every caller left is not logged as never retrieved


class Fresh(Generic[T]):
    """``fetch``'s answer, kept ``max_age_s`` from when the read that gave it was asked, then read again
    once for every caller that finds it stale meanwhile (:class:`SingleFlight`). An error is not kept."""

    def __init__(
        self, fetch: Callable[[], Awaitable[T]], max_age_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._fetch = fetch
        self.max_age_s = max_age_s
        self.clock = clock
        self._cached: tuple[float, T] | None = None
        self.reads = SingleFlight(self._read)

    async def __call__(self) -> T:
        if self._cached is not None and self.clock() - self._cached[0] < self.max_age_s:
            return self._cached[1]
        return await self.reads()

    async def _read(self) -> T:
        asked = self.clock()
        fresh = await self._fetch()
        self._cached = (asked, fresh)
        return fresh
