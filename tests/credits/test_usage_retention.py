"""Settled sends and usage rows past their retention are deleted, in batches, by the send reconciler;
recent rows and pending sends stay, and so do the balance and the ledger."""

from __future__ import annotations

import asyncio

import asyncpg

from gateway.credits.retention import SettledRetention
from gateway.sending.reconciler_actor import SendReconcilerActor
from gateway.storage import sends
from gateway.storage.ledger import check_conservation
from gateway.storage.sends import SendStatus
from tests.credits.helpers import fund, new_signature

BLOCKHASH = "11111111111111111111111111111111"


async def aged_send(pool: asyncpg.Pool, pubkey: str, status: SendStatus, age_days: float) -> str:
    """A send held and, unless ``status`` is pending, settled; then dated ``age_days`` back."""
    signature = new_signature()
    held = await sends.hold(pool, pubkey, signature, BLOCKHASH, 10, 2, f"r-{signature[:8]}")
    assert held.outcome is sends.HoldOutcome.HELD
    if status is not SendStatus.PENDING:
        await sends.settle(pool, signature, status)
    await pool.execute(
        """UPDATE sends SET created_at = now() - $2::float8 * interval '1 day',
                  settled_at = CASE WHEN settled_at IS NULL THEN NULL ELSE now() - $2::float8 * interval '1 day' END
           WHERE signature = $1""",
        signature,
        float(age_days),
    )
    return signature


async def aged_usage(pool: asyncpg.Pool, pubkey: str, age_days: float) -> int:
    row_id: int = await pool.fetchval(
        """INSERT INTO usage_history (pubkey, method, credits, request_id, created_at)
           VALUES ($1, 'getSlot', 1, 'r', now() - $2::float8 * interval '1 day') RETURNING id""",
        pubkey,
        float(age_days),
    )
    return row_id


async def kept_sends(pool: asyncpg.Pool, signatures: list[str]) -> set[str]:
    rows = await pool.fetch("SELECT signature FROM sends WHERE signature = ANY($1::text[])", signatures)
    return {row["signature"] for row in rows}


async def kept_usage(pool: asyncpg.Pool, ids: list[int]) -> set[int]:
    rows = await pool.fetch("SELECT id FROM usage_history WHERE id = ANY($1::bigint[])", ids)
    return {row["id"] for row in rows}


async def test_old_settled_rows_go_recent_and_pending_stay(pool: asyncpg.Pool, pubkey: str) -> None:
    await fund(pool, pubkey, 1_000)
    settled = [SendStatus.CONFIRMED, SendStatus.FAILED, SendStatus.EXPIRED, SendStatus.REFUSED]
    old = [await aged_send(pool, pubkey, status, 40) for status in settled]
    recent = [await aged_send(pool, pubkey, status, 10) for status in settled]
    pending = [await aged_send(pool, pubkey, SendStatus.PENDING, age) for age in (400, 1)]
    old_usage = [await aged_usage(pool, pubkey, 100) for _ in range(5)]
    recent_usage = [await aged_usage(pool, pubkey, 80) for _ in range(3)]
    balance = await pool.fetchval("SELECT balance FROM accounts WHERE pubkey = $1", pubkey)

    keeper = SettledRetention(pool, send_days=30, usage_days=90, batch=2)  # several batches per table
    gone_sends, gone_usage = await keeper.purge_once()

    assert gone_sends >= len(old) and gone_usage >= len(old_usage)  # (other tests' old rows may go too)
    assert await kept_sends(pool, old + recent + pending) == set(recent + pending)
    assert await kept_usage(pool, old_usage + recent_usage) == set(recent_usage)
    assert await sends.pending_held(pool, pubkey) == 20  # both pending holds still count
    assert await pool.fetchval("SELECT balance FROM accounts WHERE pubkey = $1", pubkey) == balance
    async with pool.acquire() as conn:
        assert (await check_conservation(conn, pubkey)).ok
    assert await keeper.purge_once() == (0, 0)


async def test_the_send_reconciler_actor_runs_the_retention(
    pool: asyncpg.Pool, pubkey: str, database_url: str, devnode_url: str
) -> None:
    await fund(pool, pubkey, 1_000)
    old = await aged_send(pool, pubkey, SendStatus.CONFIRMED, 40)
    old_usage = await aged_usage(pool, pubkey, 100)
    actor = SendReconcilerActor({"database_url": database_url, "upstream_rpc_url": devnode_url})
    try:
        for _ in range(150):  # its first pass runs as it starts
            if not (await kept_sends(pool, [old]) or await kept_usage(pool, [old_usage])):
                break
            await asyncio.sleep(0.2)
        assert await kept_sends(pool, [old]) == set() and await kept_usage(pool, [old_usage]) == set()
        status = actor.status()
        assert status["running"] and status["sends_purged"] >= 1 and status["usage_purged"] >= 1, status
    finally:
        await asyncio.to_thread(actor.shutdown)  # off the loop, which serves the devnode its last pass may be asking


async def test_a_send_held_again_after_its_row_went_is_not_charged_for_the_old_landing(
    pool: asyncpg.Pool, pubkey: str
) -> None:
    """The old landing is at a slot before the new hold's: settled at its status, nothing charged
    (whoever settles it); a landing at the hold's slot or later is charged; a send held without a
    slot (before migration 0013) is charged for any landing, as it was."""
    await fund(pool, pubkey, 1_000)
    signature = new_signature()
    held = await sends.hold(pool, pubkey, signature, BLOCKHASH, 10, 2, f"{signature}-1", hold_slot=100)
    assert held.outcome is sends.HoldOutcome.HELD
    first = await sends.settle(pool, signature, SendStatus.CONFIRMED, slot=103)
    assert first is not None and (first.charged, first.landed_before_hold) == (10, False)
    await pool.execute("UPDATE sends SET settled_at = now() - interval '40 days' WHERE signature = $1", signature)
    await SettledRetention(pool, send_days=30, usage_days=90).purge_once()
    assert await kept_sends(pool, [signature]) == set()
    balance = await pool.fetchval("SELECT balance FROM accounts WHERE pubkey = $1", pubkey)

    held = await sends.hold(pool, pubkey, signature, BLOCKHASH, 10, 2, f"{signature}-2", hold_slot=5_000)
    assert held.outcome is sends.HoldOutcome.HELD  # a new send: its record went
    again = await sends.settle(pool, signature, SendStatus.CONFIRMED, slot=103, settled_by="reconciler")
    assert again is not None and (again.status, again.charged, again.slot) == (SendStatus.CONFIRMED, 0, 103)
    assert again.landed_before_hold and again.hold_slot == 5_000
    assert await pool.fetchval("SELECT balance FROM accounts WHERE pubkey = $1", pubkey) == balance
    entries = await pool.fetch("SELECT amount FROM ledger_entries WHERE ref = $1", signature)
    assert [e["amount"] for e in entries] == [-10]  # the first landing's charge alone
    usage = await pool.fetchrow("SELECT credits, refunded FROM usage_history WHERE request_id = $1", f"{signature}-2")
    assert (usage["credits"], usage["refunded"]) == (0, True)

    at_hold, legacy = new_signature(), new_signature()
    await sends.hold(pool, pubkey, at_hold, BLOCKHASH, 10, 2, f"{signature}-3", hold_slot=5_000)
    await sends.hold(pool, pubkey, legacy, BLOCKHASH, 10, 2, f"{signature}-4")
    failed = await sends.settle(pool, at_hold, SendStatus.FAILED, slot=5_000, error="InstructionError")
    landed = await sends.settle(pool, legacy, SendStatus.CONFIRMED, slot=1)
    assert failed is not None and landed is not None and (failed.charged, landed.charged) == (2, 10)
    assert await pool.fetchval("SELECT balance FROM accounts WHERE pubkey = $1", pubkey) == balance - 12
    assert await sends.pending_held(pool, pubkey) == 0
    async with pool.acquire() as conn:
        assert (await check_conservation(conn, pubkey)).ok
