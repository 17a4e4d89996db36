"""Accounts, API keys and referral codes in PostgreSQL, and the account listings the routes show.

Reads and key rotation only; credits move in :mod:`gateway.storage.ledger`. API keys are stored as
their keyed hash (``api_keys.key_hash``), never in clear.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import asyncpg

from gateway.auth.cache import TtlCache
from gateway.auth.paging import Page
from gateway.core.webhook_events import API_KEY_ROTATED, api_key_rotated
from gateway.storage import sends
from gateway.storage.errors import postgres_call
from gateway.storage.webhook_events import enqueue_lifecycle

WHAT = "the account database"
#: One account's rows, newest first, from a cursor (ids below ``$2``) or an offset.
_PAGE_SQL = """WHERE pubkey = $1 AND ($2::bigint IS NULL OR id < $2) ORDER BY id DESC OFFSET $3 LIMIT $4"""
ACCOUNT_CACHE_TTL_S = 300.0  # accounts are never deleted, so a "yes" stays true


@dataclass(frozen=True, slots=True)
class AccountRecord:
    pubkey: str
    status: str
    created_at: datetime
    balance: int
    total_consumed: int
    daily_spend_cap: int | None = None  # docs/api.md, Spend cap
    spent_today: int = 0  # what the ledger's debits took today (UTC)


@dataclass(frozen=True, slots=True)
class DepositRecord:
    signature: str
    amount_base_units: int
    credits: int
    created_at: datetime


@dataclass(frozen=True, slots=True)
class BatchRecord:
    id: int
    source: str
    granted: int
    remaining: int
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class LedgerRecord:
    id: int
    type: str
    amount: int
    balance_after: int
    description: str
    created_at: datetime
    ref: str | None  # the deposit's signature for deposit and bonus entries


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One row of the usage history."""

    id: int
    method: str
    credits: int
    created_at: datetime
    request_id: str | None
    refunded: bool
    calls: int = 1


class AccountStore:
    def __init__(self, db: asyncpg.Pool, cache_size: int = 10_000) -> None:
        self._db = db
        self._known: TtlCache[str, bool] = TtlCache(cache_size)

    @postgres_call(WHAT)
    async def exists(self, pubkey: str) -> bool:
        """Whether an account record exists; a "yes" is cached, a "no" never is (one deposit changes it)."""
        hit, _ = self._known.get(pubkey)
        if hit:
            return True
        found = await self._db.fetchval("SELECT 1 FROM accounts WHERE pubkey = $1", pubkey)
        if found is not None:
            self._known.put(pubkey, True, ACCOUNT_CACHE_TTL_S)
        return found is not None

    @postgres_call(WHAT)
    async def suspended(self, pubkey: str) -> bool:
        """Whether the account is suspended (never cached: a suspension must show at once)."""
        status = await self._db.fetchval("SELECT status FROM accounts WHERE pubkey = $1", pubkey)
        return bool(status == "suspended")

    @postgres_call(WHAT)
    async def get(self, pubkey: str) -> AccountRecord | None:
        row = await self._db.fetchrow(
            """SELECT pubkey, status, created_at, balance, total_consumed, daily_spend_cap,
                      CASE WHEN spend_day = (now() AT TIME ZONE 'UTC')::date THEN spent_on_day ELSE 0 END AS spent_today
               FROM accounts WHERE pubkey = $1""",
            pubkey,
        )
        if row is None:
            return None
        return AccountRecord(
            row["pubkey"],
            row["status"],
            row["created_at"],
            row["balance"],
            row["total_consumed"],
            row["daily_spend_cap"],
            int(row["spent_today"]),
        )

    @postgres_call(WHAT)
    async def last_deposit(self, pubkey: str) -> DepositRecord | None:
        row = await self._db.fetchrow(
            """SELECT signature, amount_base_units, credits, created_at FROM deposits
               WHERE pubkey = $1 AND status = 'credited' ORDER BY created_at DESC LIMIT 1""",
            pubkey,
        )
        if row is None:
            return None
        return DepositRecord(row["signature"], row["amount_base_units"], row["credits"], row["created_at"])

    async def pending_send_credits(self, pubkey: str) -> int:
        """Credits held for ``sendAndConfirm`` outcomes not known yet (:func:`gateway.storage.sends.pending_held`)."""
        return await sends.pending_held(self._db, pubkey)

    @postgres_call(WHAT)
    async def live_batches(self, pubkey: str) -> list[BatchRecord]:
        """Unexpired batches with credits left, soonest expiry first (the order they are spent in)."""
        rows = await self._db.fetch(
            """SELECT id, source, granted, remaining, expires_at FROM credit_batches
               WHERE pubkey = $1 AND remaining > 0 AND expires_at > now() ORDER BY expires_at, id""",
            pubkey,
        )
        return [BatchRecord(r["id"], r["source"], r["granted"], r["remaining"], r["expires_at"]) for r in rows]

    @postgres_call(WHAT)
    async def ledger(self, pubkey: str, page: Page) -> list[LedgerRecord]:
        """Newest first, on the ``(pubkey, id DESC)`` index: a page costs offset + limit index rows."""
        rows = await self._db.fetch(
            f"""SELECT id, type, amount, balance_after, description, created_at, ref FROM ledger_entries
                {_PAGE_SQL}""",
            pubkey,
            page.before_id,
            page.offset,
            page.limit,
        )
        return [
            LedgerRecord(
                r["id"], r["type"], r["amount"], r["balance_after"], r["description"], r["created_at"], r["ref"]
            )
            for r in rows
        ]

    @postgres_call(WHAT)
    async def history(self, pubkey: str, page: Page) -> list[CallRecord]:
        """Newest first, on the ``(pubkey, id DESC)`` index like :meth:`ledger`."""
        rows = await self._db.fetch(
            f"SELECT id, method, credits, created_at, request_id, refunded, calls FROM usage_history {_PAGE_SQL}",
            pubkey,
            page.before_id,
            page.offset,
            page.limit,
        )
        return [
            CallRecord(r["id"], r["method"], r["credits"], r["created_at"], r["request_id"], r["refunded"], r["calls"])
            for r in rows
        ]

    @postgres_call(WHAT)
    async def usage_daily(self, pubkey: str, first: date) -> list[asyncpg.Record]:
        """The account's usage totals per (day, method) from ``first`` on (``usage_daily``, migration 0027;
        read by :mod:`gateway.auth.usage_totals`), on the table's primary key."""
        rows: list[asyncpg.Record] = await self._db.fetch(
            """SELECT day, method, credits, calls, refunds FROM usage_daily
               WHERE pubkey = $1 AND day >= $2 ORDER BY day, method""",
            pubkey,
            first,
        )
        return rows


class ApiKeyRows:
    """The ``api_keys`` table: which account owns an active key hash, and rotation."""

    def __init__(self, db: asyncpg.Pool) -> None:
        self._db = db

    @postgres_call(WHAT)
    async def owner(self, key_hash: bytes) -> str | None:
        found: Any = await self._db.fetchval(
            "SELECT pubkey FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL", key_hash
        )
        return str(found) if found is not None else None

    @postgres_call(WHAT)
    async def rotate(self, pubkey: str, ref_code: str | None, key_hash: bytes, key_prefix: str = "") -> list[bytes]:
        """Make ``key_hash`` the account's one active key, creating the account if missing; return the
        hashes it revoked. The ``api_key.rotated`` webhook jobs (showing ``key_prefix``) are written
        in the same transaction.

        The account row is locked first, so concurrent rotations of one account queue up instead of
        colliding on the one-active-key index. ``ref_code`` is captured only when the account is new
        and the code is known and unexpired; anything else is ignored.
        """
        async with self._db.acquire() as conn, conn.transaction():
            await conn.execute(
                """INSERT INTO accounts (pubkey, ref_code)
                   VALUES ($1, (SELECT code FROM referral_codes
                                WHERE code = $2 AND (expires_at IS NULL OR expires_at > now())))
                   ON CONFLICT (pubkey) DO NOTHING""",
                pubkey,
                ref_code,
            )
            await conn.execute("SELECT 1 FROM accounts WHERE pubkey = $1 FOR UPDATE", pubkey)
            revoked = await conn.fetch(
                "UPDATE api_keys SET revoked_at = now() WHERE pubkey = $1 AND revoked_at IS NULL RETURNING key_hash",
                pubkey,
            )
            rotated_at = await conn.fetchval(
                "INSERT INTO api_keys (pubkey, key_hash) VALUES ($1, $2) RETURNING created_at", pubkey, key_hash
            )
            event = api_key_rotated(key_prefix, rotated_at, bool(revoked))
            await enqueue_lifecycle(conn, pubkey, API_KEY_ROTATED, event)
        return [bytes(row["key_hash"]) for row in revoked]
