"""The SOL/USD rate the trade builders bill their notional fee at: a small source interface.

Two sources: :class:`PoolRate`, the live rate of a SOL/USDC pool read from the node (``trade_sol_usd_pool``; the
embedded devnode hosts one), named ``pool:<address>``; and :class:`ConfiguredRate`, the operator's number
(``trade_sol_usd_micro``, integer micro-USD per SOL), named ``configured``, which is also the pool's fallback
whenever the pool cannot be read. Either sits behind :class:`CachedRate`, so that a build never waits on the
node for it more than once per ``ttl_s``, and builds (and ``/pricing``) that find it stale together share
one read. ``/pricing`` names the source of the rate it shows (docs/api.md).
"""

from __future__ import annotations

import base64
import logging
import time
from collections.abc import Callable
from typing import Any, Final, Protocol

from solders.pubkey import Pubkey

from gateway.node.http import ChainError, Upstream, UpstreamTimeout, UpstreamUnavailable, rpc_call
from gateway.node.single_flight import Fresh
from gateway.trades.fees import SolUsdRate
from gateway.trades.pool import PoolUnreadable, micro_usd_per_sol, pool_of, reserves_to_read

__all__ = ["CachedRate", "ConfiguredRate", "PoolRate", "RateSource"]

log = logging.getLogger(__name__)

_READ: Final = {"encoding": "base64", "commitment": "confirmed"}
_TIMEOUT_S: Final = 5.0


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
    """Another source's rate, asked again only once ``ttl_s`` has passed since its last answer, and then
    once for every caller that finds it stale meanwhile (trade builds, ``/pricing``): they share the read."""

    def __init__(self, source: RateSource, ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.source = source
        self._fresh = Fresh(source.rate, ttl_s, clock)

    async def rate(self) -> SolUsdRate:
        return await self._fresh()


class PoolRate:
    """The live rate of a SOL/USDC pool on the node (``rate_source: "pool:<address>"``), or ``fallback``'s when
    the pool cannot be read (missing, not such a pool, no liquidity, the node failing): two reads, the pool and
    then its token accounts and mints."""

    def __init__(self, node: Upstream, pool: Pubkey, usd_mint: Pubkey, fallback: RateSource) -> None:
        self.node = node
        self.pool = pool
        self.usd_mint = usd_mint
        self.fallback = fallback

    async def rate(self) -> SolUsdRate:
        try:
            return SolUsdRate(await self._read(), f"pool:{self.pool}", int(time.time()))
        except (
            PoolUnreadable,
            ChainError,
            UpstreamUnavailable,
            UpstreamTimeout,
            ValueError,
            KeyError,
            TypeError,
        ) as exc:
            log.debug("SOL/USD pool %s unreadable (%s): the configured rate instead", self.pool, exc)
            return await self.fallback.rate()

    async def _read(self) -> int:
        (pool_account,) = await self._accounts([self.pool])
        if pool_account is None:
            raise PoolUnreadable(f"no account at {self.pool}")
        owner, data = pool_account
        sides = reserves_to_read(pool_of(owner, data), self.usd_mint)
        found = await self._accounts([sides.sol_account, sides.usd_account, sides.sol_mint, sides.usd_mint])
        sol, usd, sol_mint, usd_mint = (None if a is None else a[1] for a in found)
        return micro_usd_per_sol(sol, usd, sol_mint, usd_mint)

    async def _accounts(self, keys: list[Pubkey]) -> list[tuple[Pubkey, bytes] | None]:
        found = await rpc_call(self.node, "getMultipleAccounts", [[str(k) for k in keys], _READ], _TIMEOUT_S)
        values: list[Any] = found["value"]
        if len(values) != len(keys):
            raise PoolUnreadable("the node answered another number of accounts")
        return [None if v is None else (Pubkey.from_string(v["owner"]), base64.b64decode(v["data"][0])) for v in values]
