"""Credit expiry: batches past their expiry leave through ``expiry`` ledger entries.

A batch never expires below what live leases hold: a replica may be spending those credits right
now, and its calls were admitted against them. What a hold keeps from expiring now is consumed
first by the lease's usage (earliest expiry first) or expires on a later pass once the hold ends.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import asyncpg

from gateway.core.credits import EXPIRING_WINDOW_S, EventHook, fire, no_events
from gateway.core.webhook_events import CREDITS_EXPIRING, credits_expiring
from gateway.storage.errors import postgres_call
from gateway.storage.ledger.moves import expire
from gateway.storage.ledger.sql import held, lock_account
from gateway.storage.webhook_events import enqueue_lifecycle

WHAT = "the credit ledger"


@postgres_call(WHAT)
async def expire_due(pool: asyncpg.Pool, now: datetime | None = None, events: EventHook = no_events) -> int:
    """One expiry pass; returns the credits expired. Safe to run on every replica at once.

    ``now`` (default: the database clock) must not run ahead of the database clock in production:
    leases it calls expired are released, and their replica may still be spending them.
    """
    async with pool.acquire() as conn:
        at: datetime = now if now is not None else await conn.fetchval("SELECT now()")
        await conn.execute("UPDATE credit_leases SET released = true WHERE NOT released AND expires_at <= $1", at)
        due = await conn.fetch(
            "SELECT DISTINCT pubkey FROM credit_batches WHERE remaining > 0 AND expires_at <= $1", at
        )
        total = 0
        for row in due:
            total += await _expire_account(conn, row["pubkey"], at)
        notices = await _mark_expiring(conn, at)
    for pubkey, data in notices:  # after commit: the hook may miss one (a crash here), the jobs never do
        await fire(events, CREDITS_EXPIRING, pubkey, data)
    return total


async def _mark_expiring(conn: asyncpg.Connection, at: datetime) -> list[tuple[str, dict[str, Any]]]:
    """Flag the batches entering the last 24 h before their expiry and write their ``credits.expiring``
    webhook jobs, in one transaction: once per batch, whichever replica's pass gets there first."""
    async with conn.transaction():
        rows = await conn.fetch(
            """UPDATE credit_batches SET expiring_notified = true
               WHERE remaining > 0 AND NOT expiring_notified AND expires_at > $1 AND expires_at <= $2
               RETURNING id, pubkey, remaining, expires_at""",
            at,
            at + timedelta(seconds=EXPIRING_WINDOW_S),
        )
        notices = [(r["pubkey"], credits_expiring(r["id"], int(r["remaining"]), r["expires_at"])) for r in rows]
        for (pubkey, data), row in zip(notices, rows, strict=True):
            await enqueue_lifecycle(conn, pubkey, CREDITS_EXPIRING, data, f"batch:{row['id']}")
    return notices


async def _expire_account(conn: asyncpg.Connection, pubkey: str, at: datetime) -> int:
    async with conn.transaction():
        account = await lock_account(conn, pubkey)
        if account is None:
            return 0
        balance = int(account["balance"])
        room = balance - await held(conn, pubkey, at)
        batches = await conn.fetch(
            """SELECT id, remaining, source FROM credit_batches
               WHERE pubkey = $1 AND remaining > 0 AND expires_at <= $2 ORDER BY expires_at, id""",
            pubkey,
            at,
        )
        expired: list[tuple[int, int, str]] = []
        for batch in batches:
            take = min(int(batch["remaining"]), room)
            if take <= 0:
                break
            room -= take
            expired.append((int(batch["id"]), take, str(batch["source"])))
        return balance - await expire(conn, account, expired)
