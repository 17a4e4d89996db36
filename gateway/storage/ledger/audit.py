"""Conservation audit of one account, for tests and operators: reads only."""

from __future__ import annotations

import asyncpg

from gateway.core.credits import Conservation


async def check_conservation(conn: asyncpg.Connection, pubkey: str) -> Conservation:
    """Sum the ledger, the batches and the account row; ``.ok`` tells whether they agree.

    granted (deposit + bonus + adjustment) == consumed (debits - refunds) + expired + balance,
    and balance == sum(ledger) == sum(batch remainders), consumed == accounts.total_consumed.
    """
    ledger = await conn.fetchrow(
        """SELECT
             COALESCE(sum(amount) FILTER (WHERE type IN ('deposit', 'bonus', 'adjustment')), 0)::bigint AS granted,
             COALESCE(-sum(amount) FILTER (WHERE type IN ('debit', 'refund')), 0)::bigint AS consumed,
             COALESCE(-sum(amount) FILTER (WHERE type = 'expiry'), 0)::bigint AS expired,
             COALESCE(sum(amount), 0)::bigint AS total
           FROM ledger_entries WHERE pubkey = $1""",
        pubkey,
    )
    remaining = await conn.fetchval(
        "SELECT COALESCE(sum(remaining), 0)::bigint FROM credit_batches WHERE pubkey = $1", pubkey
    )
    account = await conn.fetchrow("SELECT balance, total_consumed FROM accounts WHERE pubkey = $1", pubkey)
    balance = int(account["balance"]) if account else 0
    total_consumed = int(account["total_consumed"]) if account else 0
    return Conservation(
        granted=int(ledger["granted"]),
        consumed=int(ledger["consumed"]),
        expired=int(ledger["expired"]),
        balance=balance,
        ledger_sum=int(ledger["total"]),
        batch_remaining=int(remaining),
        total_consumed=total_consumed,
    )
