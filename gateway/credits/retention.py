"""How long the records of settled calls are kept: the usage log and the sends table may not grow
without bound (docs/api.md, Account and session routes).

Once an hour, usage rows older than ``usage_retention_days`` and sends settled more than
``send_retention_days`` ago are deleted, a batch per transaction, by the one ``send-reconciler``
actor of the cluster (:mod:`gateway.sending.reconciler_actor`): it already settles sends and writes their usage
rows, so the cluster's one settling process also retires what settling wrote, and no replica runs a
copy of the pass. Balances, ledger entries and pending sends are never touched.
"""

from __future__ import annotations

import asyncio

from gateway.storage import sends
from gateway.storage.connections import Pool
from gateway.storage.ledger import purge_usage
from gateway.storage.purge import BATCH, INTERVAL_S, drain, every


class SettledRetention:
    def __init__(
        self, pool: Pool, send_days: float, usage_days: float, interval_s: float = INTERVAL_S, batch: int = BATCH
    ) -> None:
        self.pool = pool
        self.send_days = send_days
        self.usage_days = usage_days
        self.interval_s = interval_s
        self.batch = batch
        self.sends_purged = 0
        self.usage_purged = 0

    async def purge_once(self) -> tuple[int, int]:
        """Delete every settled send and usage row past retention; how many of each went."""
        gone_sends = await drain(sends.purge_settled, self.pool, self.send_days, self.batch)
        gone_usage = await drain(purge_usage, self.pool, self.usage_days, self.batch)
        self.sends_purged += gone_sends
        self.usage_purged += gone_usage
        return gone_sends, gone_usage

    async def run(self, stop: asyncio.Event) -> None:
        async def once() -> str | None:
            gone_sends, gone_usage = await self.purge_once()
            return (
                f"{gone_sends} settled sends and {gone_usage} usage rows deleted" if gone_sends or gone_usage else None
            )

        await every(self.interval_s, stop, "retention", once)
