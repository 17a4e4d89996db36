"""The conservation audit reads one snapshot: a debit committing while it runs cannot make it cry wolf.

An operator's ``gateway audit`` and the crash tests audit live accounts, with flushes committing meanwhile. The audit
is handed a real connection wrapped so that before each of its reads another connection commits a real debit (the
ledger entry, the batches and the account row in one transaction, as a flush does): an audit of several statements
reads across two commits and disagrees with itself; one statement cannot.
"""

from __future__ import annotations

from typing import Any

import asyncpg

from gateway.storage.ledger import check_conservation
from gateway.storage.ledger.moves import Move, debit
from gateway.storage.ledger.sql import lock_account
from tests.credits.helpers import fund


class DebitBeforeEachRead:
    """A connection whose every read first lets a debit of ``amount`` commit on another connection."""

    def __init__(self, conn: asyncpg.Connection, pool: asyncpg.Pool, pubkey: str, amount: int) -> None:
        self._conn, self._pool, self._pubkey, self._amount = conn, pool, pubkey, amount
        self.debits = 0

    async def _debit(self) -> None:
        async with self._pool.acquire() as other, other.transaction():
            account = await lock_account(other, self._pubkey)
            assert account is not None
            await debit(other, account, [Move("debit", -self._amount, "meanwhile", f"test:{self.debits}")])
        self.debits += 1

    async def fetchrow(self, *args: Any) -> Any:
        await self._debit()
        return await self._conn.fetchrow(*args)

    async def fetchval(self, *args: Any) -> Any:
        await self._debit()
        return await self._conn.fetchval(*args)

    async def fetch(self, *args: Any) -> Any:
        await self._debit()
        return await self._conn.fetch(*args)


async def test_a_debit_committing_during_the_audit_does_not_tear_it(
    pool: asyncpg.Pool, db: asyncpg.Connection, pubkey: str
) -> None:
    await fund(pool, pubkey, 1_000)
    racing = DebitBeforeEachRead(db, pool, pubkey, 20)
    report = await check_conservation(racing, pubkey)  # type: ignore[arg-type]  # the wrapper reads as a connection
    assert racing.debits >= 1
    assert report.ok, report
    assert report.consumed == 20 * racing.debits and report.balance == 1_000 - 20 * racing.debits
