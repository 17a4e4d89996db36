"""The credit store on real PostgreSQL: deposits once, leases and settlement, expiry, conservation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from gateway.core.credits import CreditPolicy, DepositCredit, UsageRecord
from gateway.credits.store import credit_deposit
from gateway.storage.ledger import OverspendError, balance, check_conservation, expire_due, grant_size, lease, settle
from tests.credits.helpers import fund, new_pubkey, new_signature

POLICY = CreditPolicy(credits_per_usdc=100_000, credit_expiry_seconds=3600)


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict[str, Any]]] = []

    async def __call__(self, name: str, pubkey: str, data: dict[str, Any]) -> None:
        self.events.append((name, pubkey, data))


def usage(method: str, credits: int, refunded: bool = False) -> UsageRecord:
    return UsageRecord(method, credits, refunded, "req", datetime.now(UTC))


async def assert_conserved(db: asyncpg.Connection, pubkey: str) -> None:
    report = await check_conservation(db, pubkey)
    assert report.ok, report


async def test_deposit_is_credited_once(pool: asyncpg.Pool, db: asyncpg.Connection, pubkey: str) -> None:
    events = Recorder()
    deposit = DepositCredit(new_signature(), pubkey, 1_500_000, slot=7)
    first = await credit_deposit(pool, deposit, POLICY, events)
    second = await credit_deposit(pool, deposit, POLICY, events)
    assert (first.credited, first.already_processed, first.credits_added, first.new_balance) == (
        True,
        False,
        150_000,
        150_000,
    )
    assert (second.credited, second.already_processed, second.credits_added, second.new_balance) == (
        False,
        True,
        0,
        150_000,
    )
    assert await db.fetchval("SELECT count(*) FROM ledger_entries WHERE pubkey = $1", pubkey) == 1
    row = await db.fetchrow("SELECT status, credits, slot FROM deposits WHERE signature = $1", deposit.signature)
    assert dict(row) == {"status": "credited", "credits": 150_000, "slot": 7}
    assert [e[0] for e in events.events] == ["deposit.credited"]
    assert await balance(pool, pubkey) == 150_000
    await assert_conserved(db, pubkey)


async def test_concurrent_same_signature_credits_once(pool: asyncpg.Pool, db: asyncpg.Connection) -> None:
    import asyncio

    pubkey = new_pubkey()
    deposit = DepositCredit(new_signature(), pubkey, 20_000)
    outcomes = await asyncio.gather(*(credit_deposit(pool, deposit, POLICY) for _ in range(8)))
    assert sum(o.credited for o in outcomes) == 1
    assert sum(o.already_processed for o in outcomes) == 7
    assert await balance(pool, pubkey) == 2_000
    await assert_conserved(db, pubkey)


async def test_below_minimum_is_ignored(pool: asyncpg.Pool, db: asyncpg.Connection, pubkey: str) -> None:
    events = Recorder()
    deposit = DepositCredit(new_signature(), pubkey, 9_999)
    outcome = await credit_deposit(pool, deposit, POLICY, events)
    assert not outcome.credited and not outcome.already_processed
    assert outcome.ignored_reason and "minimum" in outcome.ignored_reason
    assert (outcome.credits_added, outcome.new_balance) == (0, 0)
    row = await db.fetchrow("SELECT status, credits, reason FROM deposits WHERE signature = $1", deposit.signature)
    assert row["status"] == "ignored" and row["credits"] == 0 and row["reason"]
    assert await balance(pool, pubkey) is None  # a dust deposit creates no account
    assert events.events == []
    again = await credit_deposit(pool, deposit, POLICY)
    assert again.already_processed


async def test_referral_bonus_is_its_own_entry(pool: asyncpg.Pool, db: asyncpg.Connection) -> None:
    owner, referred = new_pubkey(), new_pubkey()
    await fund(pool, owner, 10)
    code = f"ref-{owner[:8]}"
    await db.execute("INSERT INTO referral_codes (code, owner_pubkey, bonus_percent) VALUES ($1, $2, 20)", code, owner)
    await db.execute("INSERT INTO accounts (pubkey, ref_code) VALUES ($1, $2)", referred, code)
    outcome = await credit_deposit(pool, DepositCredit(new_signature(), referred, 1_000_000), POLICY)
    assert (outcome.credits_added, outcome.bonus_credits, outcome.new_balance) == (120_000, 20_000, 120_000)
    rows = await db.fetch(
        "SELECT type, amount, balance_after FROM ledger_entries WHERE pubkey = $1 ORDER BY id", referred
    )
    assert [tuple(r) for r in rows] == [("deposit", 100_000, 100_000), ("bonus", 20_000, 120_000)]
    sources = await db.fetch("SELECT source, granted FROM credit_batches WHERE pubkey = $1 ORDER BY id", referred)
    assert [tuple(r) for r in sources] == [("deposit", 100_000), ("bonus", 20_000)]
    await assert_conserved(db, referred)


async def test_expired_referral_code_gives_no_bonus(pool: asyncpg.Pool, db: asyncpg.Connection) -> None:
    owner, referred = new_pubkey(), new_pubkey()
    await fund(pool, owner, 10)
    code = f"old-{owner[:8]}"
    await db.execute(
        "INSERT INTO referral_codes VALUES ($1, $2, 50, now() - interval '1 day')",
        code,
        owner,
    )
    await db.execute("INSERT INTO accounts (pubkey, ref_code) VALUES ($1, $2)", referred, code)
    outcome = await credit_deposit(pool, DepositCredit(new_signature(), referred, 1_000_000), POLICY)
    assert (outcome.credits_added, outcome.bonus_credits) == (100_000, 0)


def test_grant_size() -> None:
    assert grant_size(100, 20) == 20
    assert grant_size(10, 20) == 10
    assert grant_size(57, 20, at_least=1, replicas=2) == 20
    assert grant_size(30, 20, at_least=1, replicas=2) == 15  # fair share of a small balance
    assert grant_size(3, 20, at_least=25, replicas=2) == 0  # cannot pay the call: hold nothing
    assert grant_size(30, 1, at_least=25, replicas=2) == 25  # at least the price when available
    assert grant_size(0, 5) == 0


async def test_lease_settle_arithmetic(pool: asyncpg.Pool, db: asyncpg.Connection, pubkey: str) -> None:
    assert await lease(pool, pubkey, "r1", 10, 30) is None
    await fund(pool, pubkey, 100)
    first = await lease(pool, pubkey, "r1", 60, 30)
    assert first is not None and first.lease_id is not None
    assert (first.granted, first.balance, first.available_after) == (60, 100, 40)
    second = await lease(pool, pubkey, "r2", 60, 30)
    assert second is not None and second.lease_id is not None
    assert (second.granted, second.available_after) == (40, 0)
    empty = await lease(pool, pubkey, "r3", 5, 30)
    assert empty is not None and (empty.lease_id, empty.granted) == (None, 0)

    records = [usage("getSlot", 1)] * 5 + [usage("getBlock", 25), usage("getBlock", 25, refunded=True)]
    result = await settle(pool, first.lease_id, records, release=False, seq=1)
    assert (result.applied, result.charged, result.refunded, result.balance) == (True, 30, 25, 70)
    assert result.available == 70 - (60 - 55) - 40
    again = await settle(pool, first.lease_id, records, release=False, seq=1)  # a retried flush
    assert again.duplicate and again.balance == 70
    with pytest.raises(OverspendError):
        await settle(pool, first.lease_id, [usage("getSlot", 6)], release=False)
    done = await settle(pool, first.lease_id, [usage("getSlot", 5)], release=True, seq=2)
    assert (done.balance, done.available) == (65, 65 - 40)
    await settle(pool, second.lease_id, [usage("getBlock", 25, refunded=True)], release=True)
    assert await balance(pool, pubkey) == 65

    ledger = await db.fetch(
        "SELECT type, amount, balance_after FROM ledger_entries WHERE pubkey = $1 ORDER BY id", pubkey
    )
    assert [tuple(r) for r in ledger] == [
        ("deposit", 100, 100),
        ("debit", -5, 95),
        ("debit", -50, 45),
        ("refund", 25, 70),
        ("debit", -5, 65),
        ("debit", -25, 40),
        ("refund", 25, 65),
    ]
    history = await db.fetch(
        "SELECT method, credits, refunded FROM usage_history WHERE pubkey = $1 AND method = 'getBlock' ORDER BY id",
        pubkey,
    )
    assert [tuple(r) for r in history] == [("getBlock", 25, False), ("getBlock", 0, True), ("getBlock", 0, True)]
    batch = await db.fetchval("SELECT remaining FROM credit_batches WHERE pubkey = $1", pubkey)
    assert batch == 65
    await assert_conserved(db, pubkey)


async def test_debits_consume_earliest_expiring_batch_first(
    pool: asyncpg.Pool, db: asyncpg.Connection, pubkey: str
) -> None:
    await fund(pool, pubkey, 50, expiry_s=7200)
    await fund(pool, pubkey, 30, expiry_s=3600)
    grant = await lease(pool, pubkey, "r1", 40, 30)
    assert grant is not None and grant.lease_id is not None
    await settle(pool, grant.lease_id, [usage("getBlock", 25), usage("getSlot", 10)], release=True)
    rows = await db.fetch("SELECT granted, remaining FROM credit_batches WHERE pubkey = $1 ORDER BY expires_at", pubkey)
    assert [tuple(r) for r in rows] == [(30, 0), (50, 45)]
    await assert_conserved(db, pubkey)


async def test_settle_of_an_expired_lease_is_dropped(pool: asyncpg.Pool, db: asyncpg.Connection, pubkey: str) -> None:
    await fund(pool, pubkey, 20)
    grant = await lease(pool, pubkey, "r1", 10, 30)
    assert grant is not None and grant.lease_id is not None
    await db.execute("UPDATE credit_leases SET expires_at = now() - interval '1 second' WHERE id = $1", grant.lease_id)
    result = await settle(pool, grant.lease_id, [usage("getSlot", 1)], release=False)
    assert not result.applied and result.balance == 20 and result.available == 20
    await assert_conserved(db, pubkey)


async def test_low_balance_fires_once_on_crossing(pool: asyncpg.Pool, pubkey: str) -> None:
    events = Recorder()
    await fund(pool, pubkey, 1_010)
    grant = await lease(pool, pubkey, "r1", 100, 30)
    assert grant is not None and grant.lease_id is not None
    await settle(pool, grant.lease_id, [usage("getSlot", 5)], release=False, events=events)
    assert events.events == []
    await settle(pool, grant.lease_id, [usage("getSlot", 10)], release=False, events=events)
    await settle(pool, grant.lease_id, [usage("getSlot", 10)], release=True, events=events)
    assert [(n, d["balance"]) for n, _, d in events.events] == [("low_balance", 995)]
    await fund(pool, pubkey, 1_000)  # back above the threshold: the next crossing fires again
    grant = await lease(pool, pubkey, "r1", 1_000, 30)
    assert grant is not None and grant.lease_id is not None
    await settle(pool, grant.lease_id, [usage("getBlock", 990)], release=True, events=events)
    assert [n for n, _, _ in events.events] == ["low_balance", "low_balance"]


async def test_expiry_respects_outstanding_leases(pool: asyncpg.Pool, db: asyncpg.Connection, pubkey: str) -> None:
    events = Recorder()
    await fund(pool, pubkey, 100)
    await fund(pool, pubkey, 40, expiry_s=10 * 3600)  # expiring within 24 h from the start
    await db.execute(
        "UPDATE credit_batches SET expires_at = now() - interval '1 minute' WHERE pubkey = $1 AND granted = 100",
        pubkey,
    )
    grant = await lease(pool, pubkey, "r1", 120, 30)
    assert grant is not None and grant.lease_id is not None and grant.granted == 120
    expired = await expire_due(pool, events=events)
    assert expired >= 20
    assert await balance(pool, pubkey) == 120  # only what no lease holds expired
    assert ("credits.expiring", pubkey) in [(n, p) for n, p, _ in events.events]

    result = await settle(pool, grant.lease_id, [usage("getBlock", 25)] * 2, release=True)
    assert result.balance == 70
    # the lease's usage came from the expired batch first; the rest of it expires now
    await expire_due(pool, events=events)
    assert await balance(pool, pubkey) == 40
    ledger = await db.fetch("SELECT type, amount FROM ledger_entries WHERE pubkey = $1 ORDER BY id", pubkey)
    assert [tuple(r) for r in ledger] == [
        ("deposit", 100),
        ("deposit", 40),
        ("expiry", -20),
        ("debit", -50),
        ("expiry", -30),
    ]
    report = await check_conservation(db, pubkey)
    assert report.ok and (report.granted, report.consumed, report.expired, report.balance) == (140, 50, 50, 40)
    notified = [d for n, p, d in events.events if n == "credits.expiring" and p == pubkey]
    assert len(notified) == 1  # the 10 h batch, once


async def test_expire_due_releases_expired_leases(pool: asyncpg.Pool, db: asyncpg.Connection, pubkey: str) -> None:
    await fund(pool, pubkey, 10)
    grant = await lease(pool, pubkey, "r1", 10, 30)
    assert grant is not None and grant.lease_id is not None
    await db.execute("UPDATE credit_leases SET expires_at = now() - interval '1 second' WHERE id = $1", grant.lease_id)
    await db.execute("UPDATE credit_batches SET expires_at = now() - interval '1 second' WHERE pubkey = $1", pubkey)
    assert await expire_due(pool, now=datetime.now(UTC) + timedelta(seconds=1)) >= 10
    assert await db.fetchval("SELECT released FROM credit_leases WHERE id = $1", grant.lease_id)
    assert await balance(pool, pubkey) == 0
    await assert_conserved(db, pubkey)
