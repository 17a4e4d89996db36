"""Giving back the charges of paid webhook deliveries that never reached their receiver.

A delivery's charge is a ``debit`` ledger entry with ``ref`` ``delivery:<job id>``
(:func:`gateway.storage.delivery_jobs.charge`); its refund is a ``refund`` entry with the same ``ref``,
the credits put back into the account's batches, and the balance and ``total_consumed`` moved back,
all in the caller's transaction under the account lock, as every credit writer does
(:mod:`gateway.storage.ledger`). The callers: a delivery that ends dead without an answer
(:mod:`gateway.storage.delivery_jobs`) and deliveries cancelled by a webhook's deletion
(:func:`gateway.storage.webhooks.delete`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from gateway.storage.ledger.sql import Entry, add_entries


@dataclass(frozen=True)
class Refund:
    job_id: int
    credits: int
    why: str  # the ledger entry's description


async def refund_deliveries(conn: asyncpg.Connection, pubkey: str, balance: int, refunds: Sequence[Refund]) -> int:
    """Refund ``refunds`` (each more than 0 credits) to ``pubkey``, whose balance is ``balance`` under
    the account lock the caller holds; the balance after."""
    entries: list[Entry] = []
    total = 0
    for refund in refunds:
        assert refund.credits > 0, refund
        total += refund.credits
        entries.append(("refund", refund.credits, balance + total, refund.why, f"delivery:{refund.job_id}"))
    if not entries:
        return balance
    await add_entries(conn, pubkey, entries)
    await restore_batches(conn, pubkey, total)
    await conn.execute(
        "UPDATE accounts SET balance = $2, total_consumed = total_consumed - $3 WHERE pubkey = $1",
        pubkey,
        balance + total,
        total,
    )
    return balance + total


async def restore_batches(conn: asyncpg.Connection, pubkey: str, amount: int) -> None:
    """Put ``amount`` back into the account's batches, latest-expiring first (the reverse of
    :func:`gateway.storage.ledger.sql.consume_batches`). There is always room: the batches were
    granted every credit the balance ever held, and a charge took ``amount`` out of them. A batch
    past its expiry that takes some back gives it up at the next expiry pass."""
    await conn.execute(
        """UPDATE credit_batches c
           SET remaining = c.remaining + LEAST(c.granted - c.remaining, $2 - (b.cum - (c.granted - c.remaining)))
           FROM (SELECT id, sum(granted - remaining) OVER (ORDER BY expires_at DESC, id DESC) AS cum
                 FROM credit_batches WHERE pubkey = $1 AND remaining < granted) b
           WHERE c.id = b.id AND b.cum - (c.granted - c.remaining) < $2""",
        pubkey,
        amount,
    )
