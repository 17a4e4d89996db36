"""The billing primitive on real PostgreSQL: a debit across batches of different expiries, the
low-balance flag, and the refund putting back what the debit took, the ledger conserved throughout."""

from __future__ import annotations

import asyncpg

from gateway.core.credits import LOW_BALANCE_CREDITS
from gateway.storage.ledger import check_conservation
from gateway.storage.ledger.moves import Debited, Move, debit, refund
from gateway.storage.ledger.sql import lock_account
from tests.credits.helpers import fund


async def _batches(db: asyncpg.Connection, pubkey: str) -> list[tuple[int, int]]:
    rows = await db.fetch(
        "SELECT granted, remaining FROM credit_batches WHERE pubkey = $1 ORDER BY expires_at, id", pubkey
    )
    return [(int(r["granted"]), int(r["remaining"])) for r in rows]


async def _account(db: asyncpg.Connection, pubkey: str) -> tuple[int, int, bool]:
    row = await db.fetchrow(
        "SELECT balance, total_consumed, low_balance_notified FROM accounts WHERE pubkey = $1", pubkey
    )
    return int(row["balance"]), int(row["total_consumed"]), bool(row["low_balance_notified"])


async def _ledger(db: asyncpg.Connection, pubkey: str) -> list[tuple[str, int, int, str | None]]:
    rows = await db.fetch(
        """SELECT type, amount, balance_after, ref FROM ledger_entries
           WHERE pubkey = $1 AND type <> 'deposit' ORDER BY id""",
        pubkey,
    )
    return [(r["type"], int(r["amount"]), int(r["balance_after"]), r["ref"]) for r in rows]


async def _debit(pool: asyncpg.Pool, pubkey: str, moves: list[Move]) -> Debited:
    async with pool.acquire() as conn, conn.transaction():
        account = await lock_account(conn, pubkey)
        assert account is not None
        return await debit(conn, account, moves)


async def _refund(pool: asyncpg.Pool, pubkey: str, moves: list[Move]) -> int:
    async with pool.acquire() as conn, conn.transaction():
        account = await lock_account(conn, pubkey)
        assert account is not None
        return await refund(conn, account, moves)


async def _conserved(db: asyncpg.Connection, pubkey: str) -> None:
    report = await check_conservation(db, pubkey)
    assert report.ok, report


async def test_debit_and_refund_move_batches_balance_and_flag(
    pool: asyncpg.Pool, db: asyncpg.Connection, pubkey: str
) -> None:
    await fund(pool, pubkey, 600, expiry_s=7200)
    await fund(pool, pubkey, 500, expiry_s=3600)
    await fund(pool, pubkey, 400, expiry_s=10800)  # by expiry: 500 (1 h), 600 (2 h), 400 (3 h)
    assert await _batches(db, pubkey) == [(500, 500), (600, 600), (400, 400)]

    # across two batches, earliest-expiring first, and below the line: the flag set once
    first = await _debit(pool, pubkey, [Move("debit", -700, "first", "test:1")])
    assert LOW_BALANCE_CREDITS == 1_000 and first == Debited(800, 700, True)
    assert await _batches(db, pubkey) == [(500, 0), (600, 400), (400, 400)]
    assert await _account(db, pubkey) == (800, 700, True)
    await _conserved(db, pubkey)

    # mixed kinds (a lease's flush): entries in order, only the net consumed, no second crossing
    second = await _debit(
        pool, pubkey, [Move("debit", -100, "calls", "test:2"), Move("refund", 40, "refunded calls", "test:2")]
    )
    assert second == Debited(740, 60, False)
    assert await _batches(db, pubkey) == [(500, 0), (600, 340), (400, 400)]
    assert await _account(db, pubkey) == (740, 760, True)
    await _conserved(db, pubkey)

    # the refund puts credits back latest-expiring first where they were taken: the 3 h batch is
    # full, the 2 h one gets back its 260, the 1 h one the rest; the flag stays (only a deposit re-arms it)
    after = await _refund(pool, pubkey, [Move("refund", 100, "back", "test:1"), Move("refund", 200, "back", "test:3")])
    assert after == 1_040
    assert await _batches(db, pubkey) == [(500, 40), (600, 600), (400, 400)]
    assert await _account(db, pubkey) == (1_040, 460, True)
    assert await _ledger(db, pubkey) == [
        ("debit", -700, 800, "test:1"),
        ("debit", -100, 700, "test:2"),
        ("refund", 40, 740, "test:2"),
        ("refund", 100, 840, "test:1"),
        ("refund", 200, 1_040, "test:3"),
    ]
    await _conserved(db, pubkey)


async def test_nothing_to_move_writes_nothing(pool: asyncpg.Pool, db: asyncpg.Connection, pubkey: str) -> None:
    await fund(pool, pubkey, 50)
    assert await _debit(pool, pubkey, []) == Debited(50, 0, False)
    assert await _refund(pool, pubkey, []) == 50
    assert await _ledger(db, pubkey) == []
    assert await _batches(db, pubkey) == [(50, 50)]
    assert await _account(db, pubkey) == (50, 0, False)
    await _conserved(db, pubkey)


async def test_a_debit_above_the_line_leaves_the_flag(pool: asyncpg.Pool, db: asyncpg.Connection, pubkey: str) -> None:
    await fund(pool, pubkey, LOW_BALANCE_CREDITS + 10)
    assert await _debit(pool, pubkey, [Move("debit", -10, "at the line", None)]) == Debited(
        LOW_BALANCE_CREDITS, 10, False
    )
    assert await _debit(pool, pubkey, [Move("debit", -1, "below", None)]) == Debited(LOW_BALANCE_CREDITS - 1, 1, True)
    assert await _account(db, pubkey) == (LOW_BALANCE_CREDITS - 1, 11, True)
    await _conserved(db, pubkey)
