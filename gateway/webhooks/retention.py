"""How long finished webhook jobs are kept: the delivery log is not allowed to grow without bound.

Delivered, dead and cancelled jobs older than ``webhook_retention_days`` are deleted in batches, once
an hour, by the one ``webhook-watcher`` actor of the cluster (:mod:`gateway.webhooks.watcher_actor`); a dead
job can be replayed until then. Pending and delivering jobs are never deleted; but the waiting jobs of
a subscription paused for more than ``webhook_paused_retention_days`` are cancelled (and so deleted a
retention later), and parked jobs of a subscription active again are made due (:func:`unpark`).
"""

from __future__ import annotations

import asyncio

from gateway.storage.connections import Pool
from gateway.storage.purge import INTERVAL_S, drain, every
from gateway.webhooks.store.jobs import purge_finished, unpark
from gateway.webhooks.store.subscriptions import expire_paused


class JobRetention:
    def __init__(
        self, pool: Pool, retention_days: float, interval_s: float = INTERVAL_S, paused_days: float = 7.0
    ) -> None:
        self.pool = pool
        self.retention_days = retention_days
        self.paused_days = paused_days
        self.expired = 0
        self.interval_s = interval_s
        self.purged = 0

    async def purge_once(self) -> int:
        """Delete every finished job past retention, a batch per transaction; how many went."""
        gone = await drain(purge_finished, self.pool, self.retention_days)
        self.purged += gone
        self.expired += await drain(expire_paused, self.pool, self.paused_days)
        await unpark(self.pool)
        return gone

    async def run(self, stop: asyncio.Event) -> None:
        async def once() -> str | None:
            gone = await self.purge_once()
            return f"{gone} finished jobs older than {self.retention_days:g} days deleted" if gone else None

        await every(self.interval_s, stop, "webhook retention", once)
