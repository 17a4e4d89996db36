"""The backlogs an operator watches, read from the tables that hold them and set as gauges
(docs/operations.md): webhook jobs waiting or out, the oldest pending one, dead jobs, and
``sendAndConfirm`` holds still pending and the oldest one's age. Run by the ``webhook-watcher``
actor, one per cluster, every ``BACKLOG_INTERVAL_S``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

from gateway.sending.metrics import SEND_HOLD_OLDEST, SEND_HOLDS
from gateway.storage.connections import Pool
from gateway.storage.errors import StoreUnavailable, postgres_call
from gateway.webhooks.metrics import WEBHOOK_DEAD, WEBHOOK_OLDEST, WEBHOOK_QUEUE

log = logging.getLogger(__name__)

BACKLOG_INTERVAL_S = 5.0

_QUERY = """
SELECT
    (SELECT count(*) FROM delivery_jobs WHERE status IN ('pending', 'delivering')) AS queued,
    (SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0) FROM delivery_jobs
        WHERE status = 'pending') AS oldest_pending_s,
    (SELECT count(*) FROM delivery_jobs WHERE status = 'dead') AS dead,
    (SELECT count(*) FROM sends WHERE status = 'pending') AS holds,
    (SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0) FROM sends
        WHERE status = 'pending') AS oldest_hold_s
"""


@dataclass(frozen=True, slots=True)
class Backlog:
    queued: int
    oldest_pending_s: float
    dead: int
    holds: int
    oldest_hold_s: float


@postgres_call("the webhook and send backlog")
async def read_backlog(db: Pool) -> Backlog:
    row = await db.fetchrow(_QUERY)
    return Backlog(
        int(row["queued"]),
        float(row["oldest_pending_s"]),
        int(row["dead"]),
        int(row["holds"]),
        float(row["oldest_hold_s"]),
    )


def publish(backlog: Backlog) -> None:
    WEBHOOK_QUEUE.set(backlog.queued)
    WEBHOOK_OLDEST.set(backlog.oldest_pending_s)
    WEBHOOK_DEAD.set(backlog.dead)
    SEND_HOLDS.set(backlog.holds)
    SEND_HOLD_OLDEST.set(backlog.oldest_hold_s)


async def backlog_gauges(db: Pool, stop: asyncio.Event, interval_s: float = BACKLOG_INTERVAL_S) -> None:
    """Read and publish the backlog every ``interval_s`` until ``stop``; a failed read is skipped."""
    while not stop.is_set():
        try:
            publish(await read_backlog(db))
        except StoreUnavailable as exc:
            log.warning("backlog gauges: %s", exc)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval_s)
