"""Conservation audit of one account, for tests and operators: reads only.

One statement, so one snapshot: a flush commits the ledger, the batches and the account row together, and an audit
that read them in three statements could see a flush land between two of them (a false alarm on a live system; a
CI run of test_crash saw exactly that: ledger and batches at 35 consumed, the account row at 55).
"""

from __future__ import annotations

import asyncpg

from gateway.core.credits import Conservation

_AUDIT = """
WITH ledger AS (
  SELECT
    COALESCE(sum(amount) FILTER (WHERE type IN ('deposit', 'bonus', 'adjustment')), 0)::bigint AS granted,
    COALESCE(-sum(amount) FILTER (WHERE type IN ('debit', 'refund')), 0)::bigint AS consumed,
    COALESCE(-sum(amount) FILTER (WHERE type = 'expiry'), 0)::bigint AS expired,
    COALESCE(sum(amount), 0)::bigint AS total
  FROM ledger_entries WHERE pubkey = $1
), batches AS (
  SELECT COALESCE(sum(remaining), 0)::bigint AS remaining FROM credit_batches WHERE pubkey = $1
)
SELECT ledger.*, batches.remaining, account.balance, account.total_consumed
FROM ledger CROSS JOIN batches LEFT JOIN accounts AS account ON account.pubkey = $1
"""


async def check_conservation(conn: asyncpg.Connection, pubkey: str) -> Conservation:
    """Sum the ledger, the batches and the account row; ``.ok`` tells whether they agree.

    granted (deposit + bonus + adjustment) == consumed (debits - refunds) + expired + balance,
    and balance == sum(ledger) == sum(batch remainders), consumed == accounts.total_consumed.
    """
    row = await conn.fetchrow(_AUDIT, pubkey)
    assert row is not None  # aggregates without GROUP BY give one row each, and the account is a left join
    return Conservation(
        granted=int(row["granted"]),
        consumed=int(row["consumed"]),
        expired=int(row["expired"]),
        balance=int(row["balance"] or 0),
        ledger_sum=int(row["total"]),
        batch_remaining=int(row["remaining"]),
        total_consumed=int(row["total_consumed"] or 0),
    )
