"""SQL building blocks of the ledger's transactions (call them inside one), and the plain balance read."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import asyncpg

from gateway.core.credits import Standing
from gateway.storage.errors import postgres_call

#: (type, amount, balance_after, description, ref)
Entry = tuple[str, int, int, str, str | None]


async def lock_account(conn: asyncpg.Connection, pubkey: str) -> asyncpg.Record | None:
    """Lock the account row: every credit writer takes this lock first, so they serialise per account."""
    row: asyncpg.Record | None = await conn.fetchrow(
        """SELECT pubkey, balance, ref_code, rate_limit_rps, concurrency_limit, low_balance_notified, status,
                  daily_spend_cap, spend_day, spent_on_day, (now() AT TIME ZONE 'UTC')::date AS today
           FROM accounts WHERE pubkey = $1 FOR UPDATE""",
        pubkey,
    )
    return row


async def held(conn: asyncpg.Connection, pubkey: str, at: datetime | None = None) -> int:
    """Credits held by live leases (granted, not yet used) at ``at`` (default: the database's now), and
    by outcome-priced sends not settled yet (:mod:`gateway.storage.sends`)."""
    value = await conn.fetchval(
        """SELECT (SELECT COALESCE(sum(granted - used), 0) FROM credit_leases
                   WHERE pubkey = $1 AND NOT released AND expires_at > COALESCE($2::timestamptz, now()))
                + (SELECT COALESCE(sum(held), 0) FROM sends WHERE pubkey = $1 AND status = 'pending')""",
        pubkey,
        at,
    )
    return int(value)


async def holds(conn: asyncpg.Connection, pubkey: str, balance: int) -> tuple[int, Standing]:
    """:func:`held` (at the database's now) and the account's :class:`Standing` at ``balance``, in one
    query; call it holding the account lock, after the transaction's writes."""
    row = await conn.fetchrow(
        """SELECT (SELECT COALESCE(sum(granted - used), 0) FROM credit_leases
                   WHERE pubkey = $1 AND NOT released AND expires_at > now()) AS leases,
                  (SELECT COALESCE(sum(held), 0) FROM sends WHERE pubkey = $1 AND status = 'pending') AS sends,
                  extract(epoch FROM clock_timestamp())::float8 AS as_of""",
        pubkey,
    )
    pending = int(row["sends"])
    return int(row["leases"]) + pending, Standing(balance, pending, float(row["as_of"]))


async def add_entries(conn: asyncpg.Connection, pubkey: str, entries: Sequence[Entry]) -> None:
    """Append ledger entries in order (ids grow with the order given)."""
    if not entries:
        return
    await conn.execute(
        """INSERT INTO ledger_entries (pubkey, type, amount, balance_after, description, ref)
           SELECT $1, t, a, b, d, r
           FROM unnest($2::text[], $3::bigint[], $4::bigint[], $5::text[], $6::text[])
                WITH ORDINALITY AS u(t, a, b, d, r, n)
           ORDER BY n""",
        pubkey,
        [e[0] for e in entries],
        [e[1] for e in entries],
        [e[2] for e in entries],
        [e[3] for e in entries],
        [e[4] for e in entries],
    )


async def consume_batches(conn: asyncpg.Connection, pubkey: str, amount: int) -> None:
    """Take ``amount`` from the account's batches, earliest-expiring first.

    No row locks on batches: every writer of an account's batches holds its account row lock.
    """
    if amount <= 0:
        return
    status = await conn.execute(
        """UPDATE credit_batches c
           SET remaining = c.remaining - LEAST(c.remaining, $2 - (b.cum - c.remaining))
           FROM (SELECT id, sum(remaining) OVER (ORDER BY expires_at, id) AS cum
                 FROM credit_batches WHERE pubkey = $1 AND remaining > 0) b
           WHERE c.id = b.id AND b.cum - c.remaining < $2""",
        pubkey,
        amount,
    )
    if status == "UPDATE 0":
        raise AssertionError(f"no credit batches to consume {amount} credits of {pubkey}")


async def restore_batches(conn: asyncpg.Connection, pubkey: str, amount: int) -> None:
    """Put ``amount`` back into the account's batches, latest-expiring first (the reverse of
    :func:`consume_batches`). There is always room: the batches were granted every credit the balance
    ever held, and a charge took ``amount`` out of them. A batch past its expiry that takes some back
    gives it up at the next expiry pass."""
    await conn.execute(
        """UPDATE credit_batches c
           SET remaining = c.remaining + LEAST(c.granted - c.remaining, $2 - (b.cum - (c.granted - c.remaining)))
           FROM (SELECT id, sum(granted - remaining) OVER (ORDER BY expires_at DESC, id DESC) AS cum
                 FROM credit_batches WHERE pubkey = $1 AND remaining < granted) b
           WHERE c.id = b.id AND b.cum - (c.granted - c.remaining) < $2""",
        pubkey,
        amount,
    )


@postgres_call("the credit ledger")
async def balance(pool: asyncpg.Pool, pubkey: str) -> int | None:
    """The account's balance (leased credits included), or None when there is no account."""
    value = await pool.fetchval("SELECT balance FROM accounts WHERE pubkey = $1", pubkey)
    return None if value is None else int(value)
