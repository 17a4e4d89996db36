"""Property: whatever the order of deposits, leases, settlements and expiries, the store never lets a
balance go negative, never lets holds exceed the balance, and conserves credits."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import asyncpg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.core.credits import UsageRecord
from gateway.storage.ledger import check_conservation, expire_due, lease, settle
from gateway.storage.ledger.sql import held
from tests.credits.helpers import fund, new_pubkey

deposits = st.tuples(st.just("deposit"), st.integers(min_value=1, max_value=200))
leases = st.tuples(st.just("lease"), st.integers(min_value=0, max_value=2), st.integers(min_value=0, max_value=80))
settles = st.tuples(
    st.just("settle"),
    st.integers(min_value=0, max_value=20),
    st.lists(st.tuples(st.sampled_from([1, 2, 5, 25]), st.booleans()), max_size=12),
    st.booleans(),
)
expiries = st.tuples(st.just("expire_batch"), st.integers(min_value=0, max_value=20))
lease_ends = st.tuples(st.just("expire_lease"), st.integers(min_value=0, max_value=20))
operations = st.lists(st.one_of(deposits, leases, settles, expiries, lease_ends), min_size=1, max_size=25)


@dataclass
class OpenLease:
    id: int
    granted: int
    used: int = 0
    ended: bool = False


async def apply(
    pool: asyncpg.Pool, conn: asyncpg.Connection, pubkey: str, op: tuple[Any, ...], book: list[OpenLease]
) -> None:
    kind = op[0]
    if kind == "deposit":
        await fund(pool, pubkey, op[1])
    elif kind == "lease":
        grant = await lease(pool, pubkey, f"r{op[1]}", op[2], 60, replicas=op[1] + 1)
        if grant is not None and grant.lease_id is not None:
            assert grant.available_after >= 0
            book.append(OpenLease(grant.lease_id, grant.granted))
    elif kind == "settle" and book:
        target = book[op[1] % len(book)]
        records = []
        for price, refunded in op[2]:
            if target.used + price <= target.granted:  # a replica spends only what its lease holds
                target.used += price
                records.append(UsageRecord("m", price, refunded, "p", datetime.now(UTC)))
        result = await settle(pool, target.id, records, release=op[3])
        assert result.balance >= 0
        target.ended = target.ended or op[3] or not result.applied
    elif kind == "expire_batch":
        batches = await conn.fetch("SELECT id FROM credit_batches WHERE pubkey = $1 ORDER BY id", pubkey)
        if batches:
            batch_id = batches[op[1] % len(batches)]["id"]
            await conn.execute("UPDATE credit_batches SET expires_at = now() - interval '1 s' WHERE id = $1", batch_id)
            await expire_due(pool)
    elif kind == "expire_lease" and book:
        target = book[op[1] % len(book)]
        await conn.execute("UPDATE credit_leases SET expires_at = now() - interval '1 s' WHERE id = $1", target.id)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=operations)
async def test_store_invariants_hold_under_any_sequence(pool: asyncpg.Pool, ops: list[tuple[Any, ...]]) -> None:
    pubkey = new_pubkey()
    book: list[OpenLease] = []
    async with pool.acquire() as conn:
        for op in ops:
            await apply(pool, conn, pubkey, op, book)
            report = await check_conservation(conn, pubkey)
            assert report.ok, (op, report)
            assert 0 <= await held(conn, pubkey) <= report.balance
