"""How long the records of settled calls are kept: the usage log and the sends table may not grow
without bound (docs/api.md, Account and session routes).

Once an hour, usage rows older than ``usage_retention_days`` and sends settled more than
``send_retention_days`` ago are deleted, a batch per transaction, by the one ``send-reconciler``
actor of the cluster (:mod:`actors.send_reconciler`): it already settles sends and writes their usage
rows, so the cluster's one settling process also retires what settling wrote, and no replica runs a
copy of the pass. Balances, ledger entries and pending sends are never touched.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from gateway.storage import sends
from gateway.storage.connections import Pool
from gateway.storage.errors import StoreUnavailable
from gateway.storage.ledger import purge_usage

log = logging.getLogger(__name__)

INTERVAL_S = 3600.0
BATCH = 5_000

Purge = Callable[[Pool, float, int], Awaitable[int]]


class SettledRetention:
    def __init__(self, pool: Pool, send_days: float, usage_days: float, interval_s: float = INTERVAL_S) -> None:
        self.pool = pool
        self.send_days = send_days
        self.usage_days = usage_days
        self.interval_s = interval_s
        self.sends_purged = 0
        self.usage_purged = 0

    async def purge_once(self) -> tuple[int, int]:
        """Delete every settled send and usage row past retention; how many of each went."""
        gone_sends = await self._drain(sends.purge_settled, self.send_days)
        gone_usage = await self._drain(purge_usage, self.usage_days)
        self.sends_purged += gone_sends
        self.usage_purged += gone_usage
        return gone_sends, gone_usage

    async def _drain(self, purge: Purge, days: float) -> int:
        total = 0
        while True:
            gone = await purge(self.pool, days, BATCH)
            total += gone
            if gone < BATCH:
                return total
            await asyncio.sleep(0)  # let the actor's other loop (the reconciler's passes) run between batches

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                gone_sends, gone_usage = await self.purge_once()
                if gone_sends or gone_usage:
                    log.info("retention: %d settled sends and %d usage rows deleted", gone_sends, gone_usage)
            except StoreUnavailable as exc:
                log.warning("retention: %s", exc)
            except Exception:  # a bug: logged, tried again at the next interval
                log.exception("retention pass failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.interval_s)
