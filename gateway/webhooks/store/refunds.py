"""Giving back the charges of paid webhook deliveries that never reached their receiver.

A delivery's charge is a ``debit`` ledger entry with ``ref`` ``delivery:<job id>``
(:func:`gateway.webhooks.store.jobs.charge`); its refund is a ``refund`` entry with the same ``ref``,
the credits put back into the account's batches, and the balance and ``total_consumed`` moved back,
all in the caller's transaction under the account lock, as every credit writer does
(:func:`gateway.storage.ledger.moves.refund`). The callers: a delivery that ends dead without an answer
(:mod:`gateway.webhooks.store.jobs`) and deliveries cancelled by a webhook's deletion
(:func:`gateway.webhooks.store.subscriptions.delete`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from gateway.storage.ledger.moves import Move, refund


@dataclass(frozen=True)
class Refund:
    job_id: int
    credits: int
    why: str  # the ledger entry's description


async def refund_deliveries(conn: asyncpg.Connection, account: asyncpg.Record, refunds: Sequence[Refund]) -> int:
    """Refund ``refunds`` (each more than 0 credits) to the account whose row ``account`` is, as
    :func:`gateway.storage.ledger.sql.lock_account` returned it in the caller's transaction; the
    balance after."""
    return await refund(conn, account, [Move("refund", r.credits, r.why, f"delivery:{r.job_id}") for r in refunds])
