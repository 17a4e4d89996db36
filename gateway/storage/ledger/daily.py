"""The per-day usage totals (``usage_daily``, migration 0027): kept by every writer of ``usage_history``
in the same transaction as its rows, so a day's and a method's totals are read from a few rows instead
of summed from millions (docs/api.md, Usage totals). One upsert statement per write, one row per distinct
(day, method) in it: a lease flush of thousands of calls adds a handful of rows.

The totals are exact integers and equal the sums of the usage rows they stand for: ``credits`` and
``calls`` the columns' sums, ``refunds`` the calls of refunded rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime
from operator import itemgetter

import asyncpg

from gateway.core.credits import UsageRecord

#: (day, method) -> [credits, calls, refunds]
Totals = dict[tuple[date, str], list[int]]


def utc_day(at: datetime) -> date:
    return (at.astimezone(UTC) if at.tzinfo else at).date()


def totals_of(records: Sequence[UsageRecord]) -> Totals:
    """What ``records`` add to the totals, as :func:`gateway.storage.ledger.leases` writes their rows
    (a refunded record's row is at 0 credits). A flush holds thousands of records, nearly always of one
    day: then the day is worked out once (``min``/``max`` run in C) and records are summed per method."""
    if not records:
        return {}
    ats = list(map(itemgetter(4), records))
    first, last = utc_day(min(ats)), utc_day(max(ats))
    if first != last:
        totals: Totals = {}
        for r in records:
            _add(totals, (utc_day(r.at), r.method), r.credits, r.refunded, r.calls)
        return totals
    per_method: dict[str, list[int]] = {}
    for method, credits, refunded, _request_id, _at, calls in records:
        row = per_method.get(method)
        if row is None:
            row = per_method[method] = [0, 0, 0]
        if refunded:
            row[1] += calls
            row[2] += calls
        else:
            row[0] += credits
            row[1] += calls
    return {(first, method): row for method, row in per_method.items()}


def _add(totals: Totals, key: tuple[date, str], credits: int, refunded: bool, calls: int) -> None:
    row = totals.get(key)
    if row is None:
        row = totals[key] = [0, 0, 0]
    row[0] += 0 if refunded else credits
    row[1] += calls
    row[2] += calls if refunded else 0


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
