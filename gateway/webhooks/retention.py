"""How long finished webhook jobs are kept: the delivery log is not allowed to grow without bound.

Delivered, dead and cancelled jobs older than ``webhook_retention_days`` are deleted in batches, once
an hour, by the one ``webhook-watcher`` actor of the cluster (:mod:`actors.webhook_watcher`); a dead
job can be replayed until then. Pending and delivering jobs are never deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from gateway.storage.connections import Pool
from gateway.storage.delivery_jobs import purge_finished
from gateway.storage.errors import StoreUnavailable

log = logging.getLogger(__name__)

INTERVAL_S = 3600.0
BATCH = 5_000


class JobRetention:
    def __init__(self, pool: Pool, retention_days: float, interval_s: float = INTERVAL_S) -> None:
        self.pool = pool
        self.retention_days = retention_days
        self.interval_s = interval_s
        self.purged = 0

    async def purge_once(self) -> int:
        """Delete every finished job past retention, a batch per transaction; how many went."""
        total = 0
        while True:
            gone = await purge_finished(self.pool, self.retention_days, BATCH)
            total += gone
            if gone < BATCH:
                break
            await asyncio.sleep(0)  # let the other loops of the actor run between batches
        self.purged += total
        return total

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                gone = await self.purge_once()
                if gone:
                    log.info(
                        "webhook retention: %d finished jobs older than %g days deleted", gone, self.retention_days
                    )
            except StoreUnavailable as exc:
                log.warning("webhook retention: %s", exc)
            except Exception:  # a bug: logged, tried again at the next interval
                log.exception("webhook retention pass failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.interval_s)
