"""The SOL/USD rate the trade builders bill their notional fee at: a small source interface.

No price feed exists offline, so this build has one source, :class:`ConfiguredRate`: the operator's
number (``trade_sol_usd_micro``, integer micro-USD per SOL). It is not a live price, and ``/pricing``
says so (``rate_source: "configured"``). A live source (an oracle account read from the node, an
exchange's API) would implement :class:`RateSource` and sit behind :class:`CachedRate`, so that a build
never waits on it more than once per ``ttl_s``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from gateway.trades.fees import SolUsdRate

__all__ = ["CachedRate", "ConfiguredRate", "RateSource"]


class RateSource(Protocol):
    async def rate(self) -> SolUsdRate:
        """The current SOL/USD rate; raises when the source cannot give one (the build is then refused)."""
        ...


class ConfiguredRate:
    """A fixed, operator-configured rate (``rate_source: "configured"``)."""

    def __init__(self, micro_usd_per_sol: int) -> None:
        if isinstance(micro_usd_per_sol, bool) or micro_usd_per_sol <= 0:
            raise ValueError(f"a SOL/USD rate must be a positive integer of micro-USD, got {micro_usd_per_sol!r}")
        self._rate = SolUsdRate(micro_usd_per_sol, "configured")

    async def rate(self) -> SolUsdRate:
        return self._rate


class CachedRate:
    """Another source's rate, asked again only once ``ttl_s`` has passed since its last answer."""

    def __init__(self, source: RateSource, ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.source = source
        self.ttl_s = ttl_s
        self.clock = clock
        self._cached: tuple[float, SolUsdRate] | None = None

    async def rate(self) -> SolUsdRate:
        now = self.clock()
        if self._cached is not None and now - self._cached[0] < self.ttl_s:
            return self._cached[1]
        fresh = await self.source.rate()
        self._cached = (now, fresh)
        return fresh
