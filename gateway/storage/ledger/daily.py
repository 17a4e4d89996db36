"""The per-day usage totals (``usage_daily``, migration 0027): kept by every writer of ``usage_history``
in the same transaction as its rows, so a day's and a method's totals are read from a few rows instead
of summed from millions (docs/api.md, Usage totals). One upsert statement per write, one row per distinct
(day, method) in it: a lease flush of thousands of calls adds a handful of rows.

The totals are exact integers and equal the sums of the usage rows they stand for: ``credits`` and
``calls`` the columns' sums, ``refunds`` the calls of refunded rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, date, datetime

import asyncpg

from gateway.core.credits import UsageRecord

#: (day, method) -> [credits, calls, refunds]
Totals = dict[tuple[date, str], list[int]]


def utc_day(at: datetime) -> date:
    return (at.astimezone(UTC) if at.tzinfo else at).date()


def totals_of(records: Iterable[UsageRecord]) -> Totals:
    """What ``records`` add to the totals, as :func:`gateway.storage.ledger.leases` writes their rows
    (a refunded record's row is at 0 credits)."""
    totals: Totals = {}
    for r in records:
        row = totals.get((utc_day(r.at), r.method))
        if row is None:
            row = totals[(utc_day(r.at), r.method)] = [0, 0, 0]
        if r.refunded:
            row[1] += r.calls
            row[2] += r.calls
        else:
            row[0] += r.credits
            row[1] += r.calls
    return totals


async def add_totals(conn: asyncpg.Connection, pubkey: str, totals: Totals) -> None:
    """Add ``totals`` to the account's rows in one statement (run inside the usage rows' transaction)."""
    if not totals:
        return
    keys: Sequence[tuple[date, str]] = list(totals)
    await conn.execute(
        """INSERT INTO usage_daily AS d (pubkey, day, method, credits, calls, refunds)
           SELECT $1, t.day, t.method, t.credits, t.calls, t.refunds
           FROM unnest($2::date[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[])
                AS t(day, method, credits, calls, refunds)
           ON CONFLICT (pubkey, day, method) DO UPDATE
           SET credits = d.credits + EXCLUDED.credits, calls = d.calls + EXCLUDED.calls,
               refunds = d.refunds + EXCLUDED.refunds""",
        pubkey,
        [day for day, _ in keys],
        [method for _, method in keys],
        [totals[k][0] for k in keys],
        [totals[k][1] for k in keys],
        [totals[k][2] for k in keys],
    )
