"""The lifecycle webhook events' outbox: their delivery jobs written where they happen.

Lifecycle events are written by :func:`enqueue_lifecycle` on the connection of the transaction that
causes them (a deposit credited, a deduction crossing the low-balance line, a key rotated, a batch
marked as expiring), so a job exists exactly when its cause committed: none is lost by a crash after
the commit, none is invented by a change that rolled back. Without a subscription listing the event
the statement inserts nothing.

It stays below the webhooks feature because its writers do: credits, the ledger and auth sit under
webhooks in the layers and may not import it. The jobs of the transaction watches and the signals,
which only the feature's sources write, are in :mod:`gateway.webhooks.store.sources`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import asyncpg
import orjson

#: A job's dedupe key (when it has one) is unique per subscription: a second write of it adds nothing.
ON_CONFLICT = "ON CONFLICT (webhook_id, dedupe_key) WHERE dedupe_key IS NOT NULL DO NOTHING"


#: Lifecycle events one subscription may have waiting (pending or out): past them a new one is not
#: queued. They are free and some can be caused at will (``api_key.rotated``); a receiver that does not
#: take them must not make the queue grow without bound (docs/api.md, Webhooks).
MAX_WAITING_LIFECYCLE = 100


async def enqueue_lifecycle(
    conn: asyncpg.Connection, pubkey: str, event: str, payload: Mapping[str, Any], dedupe_key: str | None = None
) -> int:
    """One ``event`` job per active ``lifecycle`` subscription of ``pubkey`` listing it and with fewer
    than :data:`MAX_WAITING_LIFECYCLE` jobs waiting; how many.

    Call it inside the transaction of the change (it takes no lock and commits nothing)."""
    status: str = await conn.execute(
        f"""INSERT INTO delivery_jobs (webhook_id, event_type, payload, dedupe_key)
            SELECT w.id, $2, $3::jsonb, $4 FROM webhooks w
            WHERE w.pubkey = $1 AND w.status = 'active' AND w.filter_type = 'lifecycle'
              AND $2 = ANY (w.lifecycle_events)
              AND (SELECT count(*) FROM (
                       SELECT 1 FROM delivery_jobs j
                       WHERE j.webhook_id = w.id AND j.status IN ('pending', 'delivering') LIMIT $5) waiting) < $5
            ORDER BY w.id
            {ON_CONFLICT}""",
        pubkey,
        event,
        json_text(payload),
        dedupe_key,
        MAX_WAITING_LIFECYCLE,
    )
    return int(status.rsplit(" ", 1)[-1])


def json_text(value: Mapping[str, Any]) -> str:
    """A job's payload as the JSON text its ``jsonb`` column is sent."""
    return orjson.dumps(value).decode()
