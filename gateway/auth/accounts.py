"""Account records and their read-only listings in PostgreSQL, as the auth stage and account routes need them.

Balances are not read here but through a :class:`BalanceSource`: the default sums the append-only
ledger (the durable truth), and the credits work replaces it with the live ledger actors, whose
figure includes spending not yet written down.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import asyncpg

from gateway.auth.cache import TtlCache
from gateway.auth.db import db_errors

ACCOUNT_CACHE_TTL_S = 300.0  # accounts are never deleted, so a "yes" stays true


class BalanceSource(Protocol):
    """Where an account's figures come from."""

    async def balance(self, pubkey: str) -> int: ...

    async def total_consumed(self, pubkey: str) -> int: ...


class LedgerBalanceSource:
    """Figures summed from ``ledger_entries``: balance = all amounts; consumed = debits net of refunds."""

    def __init__(self, db: asyncpg.Pool) -> None:
        self._db = db

    async def balance(self, pubkey: str) -> int:
        async with db_errors():
            value: Any = await self._db.fetchval(
                "SELECT COALESCE(SUM(amount), 0) FROM ledger_entries WHERE pubkey = $1", pubkey
            )
        return int(value)

    async def total_consumed(self, pubkey: str) -> int:
        async with db_errors():
            value: Any = await self._db.fetchval(
                """SELECT COALESCE(-SUM(amount), 0) FROM ledger_entries
                   WHERE pubkey = $1 AND type IN ('debit', 'refund')""",
                pubkey,
            )
        return int(value)


@dataclass(frozen=True, slots=True)
class AccountRecord:
    pubkey: str
    status: str
    created_at: datetime


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
    type: str
    amount: int
    balance_after: int
    description: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class UsageRecord:
    method: str
    credits: int
    created_at: datetime


class AccountStore:
    def __init__(self, db: asyncpg.Pool, cache_size: int = 10_000) -> None:
        self._db = db
        self._known: TtlCache[str, bool] = TtlCache(cache_size)

    async def exists(self, pubkey: str) -> bool:
        """Whether an account record exists; a "yes" is cached, a "no" never is (one deposit changes it)."""
        hit, _ = self._known.get(pubkey)
        if hit:
            return True
        async with db_errors():
            found = await self._db.fetchval("SELECT 1 FROM accounts WHERE pubkey = $1", pubkey)
        if found is not None:
            self._known.put(pubkey, True, ACCOUNT_CACHE_TTL_S)
        return found is not None

    async def get(self, pubkey: str) -> AccountRecord | None:
        async with db_errors():
            row = await self._db.fetchrow("SELECT pubkey, status, created_at FROM accounts WHERE pubkey = $1", pubkey)
        return None if row is None else AccountRecord(row["pubkey"], row["status"], row["created_at"])

    async def last_deposit(self, pubkey: str) -> DepositRecord | None:
        async with db_errors():
            row = await self._db.fetchrow(
                """SELECT signature, amount_base_units, credits, created_at FROM deposits
                   WHERE pubkey = $1 AND status = 'credited' ORDER BY created_at DESC LIMIT 1""",
                pubkey,
            )
        if row is None:
            return None
        return DepositRecord(row["signature"], row["amount_base_units"], row["credits"], row["created_at"])

    async def live_batches(self, pubkey: str) -> list[BatchRecord]:
        """Unexpired batches with credits left, soonest expiry first (the order they are spent in)."""
        async with db_errors():
            rows = await self._db.fetch(
                """SELECT id, source, granted, remaining, expires_at FROM credit_batches
                   WHERE pubkey = $1 AND remaining > 0 AND expires_at > now() ORDER BY expires_at, id""",
                pubkey,
            )
        return [BatchRecord(r["id"], r["source"], r["granted"], r["remaining"], r["expires_at"]) for r in rows]

    async def ledger(self, pubkey: str, offset: int, limit: int) -> list[LedgerRecord]:
        """Newest first; served by the ``(pubkey, id DESC)`` index, so a page costs offset + limit index rows."""
        async with db_errors():
            rows = await self._db.fetch(
                """SELECT type, amount, balance_after, description, created_at FROM ledger_entries
                   WHERE pubkey = $1 ORDER BY id DESC OFFSET $2 LIMIT $3""",
                pubkey,
                offset,
                limit,
            )
        return [
            LedgerRecord(r["type"], r["amount"], r["balance_after"], r["description"], r["created_at"]) for r in rows
        ]

    async def history(self, pubkey: str, offset: int, limit: int) -> list[UsageRecord]:
        """Newest first, on the ``(pubkey, id DESC)`` index like :meth:`ledger`."""
        async with db_errors():
            rows = await self._db.fetch(
                """SELECT method, credits, created_at FROM usage_history
                   WHERE pubkey = $1 ORDER BY id DESC OFFSET $2 LIMIT $3""",
                pubkey,
                offset,
                limit,
            )
        return [UsageRecord(r["method"], r["credits"], r["created_at"]) for r in rows]
