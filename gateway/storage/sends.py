"""Outcome-priced sends in PostgreSQL: a durable hold before the broadcast, a settlement at the outcome.

Table ``sends`` (migration 0006). :func:`hold` takes the landing price out of what the account can
spend (it counts in :func:`gateway.storage.ledger.sql.held`) in one transaction under the account
lock, before anything is sent; :func:`settle` charges the outcome's price once, with a ``debit``
ledger entry that names the outcome and a usage row, and releases the hold. Settling is idempotent:
the racer and the reconciler may both try, the first wins.

A send is charged only for a landing at or after ``hold_slot``, the node's slot read before its hold
(migration 0013): the same signed transaction may have landed before, through an earlier send whose
record retention deleted (:func:`purge_settled`) or another route, and a node that keeps history
answers that old landing to whoever asks. Such a send is settled at the old landing's status
(``confirmed`` or ``failed``, its slot) with nothing charged (:func:`landed_before`), whichever
settles it: the race's result or the reconciler.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import StrEnum

import asyncpg

from gateway.core.credits import Standing
from gateway.storage.errors import postgres_call
from gateway.storage.ledger.cap import room
from gateway.storage.ledger.daily import add_totals, utc_day
from gateway.storage.ledger.moves import Move, debit
from gateway.storage.ledger.sql import holds, lock_account

log = logging.getLogger(__name__)

WHAT = "the credit ledger"


class SendStatus(StrEnum):
    PENDING = "pending"  # held; the outcome is not known yet
    CONFIRMED = "confirmed"  # landed and succeeded: the landing price
    FAILED = "failed"  # landed and failed: the base fee
    EXPIRED = "expired"  # broadcast, never landed before its blockhash expired (or released unproven): the base fee
    REFUSED = "refused"  # its preflight simulation failed or could not run: nothing was sent, nothing


class HoldOutcome(StrEnum):
    HELD = "held"
    NO_ACCOUNT = "no_account"
    INSUFFICIENT = "insufficient"
    DUPLICATE = "duplicate"  # this signature was held before (a retry of the same transaction)
    CAPPED = "capped"  # the account's daily spend cap leaves too little today (docs/api.md, Spend cap)


@dataclass(frozen=True)
class Hold:
    outcome: HoldOutcome
    available: int  # what the account could spend after this hold (before it, when not held)
    from_lease: bool = False  # the credits came out of the lease offered (it was shrunk by ``held``)
    standing: Standing | None = None  # the account as this answer left it


@dataclass(frozen=True)
class SendRecord:
    signature: str
    pubkey: str
    blockhash: str
    held: int
    base_fee: int
    status: SendStatus
    charged: int | None
    slot: int | None
    error: str | None
    legs: list[str]
    retry_count: int
    created_at: datetime
    settled_at: datetime | None
    hold_slot: int | None = None  # the node's slot before the hold; None for sends held before it was kept
    standing: Standing | None = None  # the account as :func:`settle` left it; None when only read

    @property
    def landed_before_hold(self) -> bool:
        """It landed, but before this send was held: settled at that landing's status, charged nothing."""
        landed = self.status in (SendStatus.CONFIRMED, SendStatus.FAILED)
        return landed and landed_before(self.hold_slot, self.slot)


def landed_before(hold_slot: int | None, slot: int | None) -> bool:
    """Whether a landing at ``slot`` cannot be the send held at ``hold_slot``: the transaction landed
    before anything of this send was sent, so it is not charged. Charging needs the proof: a landing
    whose slot the node did not say counts as earlier. A send held without a slot (before migration
    0013) is charged for any landing, as it was."""
    return hold_slot is not None and (slot is None or slot < hold_slot)


@postgres_call(WHAT)
async def pending_held(db: asyncpg.Pool | asyncpg.Connection, pubkey: str) -> int:
    """Credits held by this account's sends whose outcome is not settled yet (part of its balance,
    not spendable: settled at the landing price, the base fee or nothing)."""
    value = await db.fetchval(
        "SELECT COALESCE(sum(held), 0) FROM sends WHERE pubkey = $1 AND status = 'pending'", pubkey
    )
    return int(value)


@postgres_call(WHAT)
async def hold(
    pool: asyncpg.Pool,
    pubkey: str,
    signature: str,
    blockhash: str,
    landing: int,
    base_fee: int,
    request_id: str,
    from_lease: int | None = None,
    *,
    hold_slot: int | None = None,
) -> Hold:
    """Hold ``landing`` credits for the send ``signature``, out of the lease ``from_lease`` (a replica's
    own, unused credits) when it still has them, else out of what no lease or send holds.
    ``hold_slot``: the node's slot read before this hold; only a landing at or after it is charged."""
    async with pool.acquire() as conn, conn.transaction():
        account = await lock_account(conn, pubkey)
        if account is None:
            return Hold(HoldOutcome.NO_ACCOUNT, 0)
        held, standing = await holds(conn, pubkey, int(account["balance"]))
        available = standing.balance - held
        if await conn.fetchval("SELECT 1 FROM sends WHERE signature = $1", signature):
            return Hold(HoldOutcome.DUPLICATE, available, standing=standing)
        lease_has = from_lease is not None and await conn.fetchval(
            """SELECT 1 FROM credit_leases WHERE id = $1 AND pubkey = $2 AND NOT released
               AND expires_at > now() AND granted - used >= $3 FOR UPDATE""",
            from_lease,
            pubkey,
            landing,
        )
        if lease_has:
            available += landing  # the lease gives back what the send holds
        if account["status"] == "suspended" or available < landing:
            return Hold(HoldOutcome.INSUFFICIENT, available, standing=standing)
        today = room(account, held)  # the daily spend cap (a lease's credits are inside it already)
        if not lease_has and today is not None and today < landing:
            return Hold(HoldOutcome.CAPPED, available, standing=standing)
        if lease_has:
            await conn.execute("UPDATE credit_leases SET granted = granted - $2 WHERE id = $1", from_lease, landing)
        await conn.execute(
            """INSERT INTO sends (signature, pubkey, request_id, blockhash, held, base_fee, hold_slot)
               VALUES ($1, $2, $3, $4, $5, $6, $7)""",
            signature,
            pubkey,
            request_id,
            blockhash,
            landing,
            base_fee,
            hold_slot,
        )
        pending = replace(standing, pending_sends=standing.pending_sends + landing)
        return Hold(HoldOutcome.HELD, available - landing, bool(lease_has), pending)


@postgres_call(WHAT)
async def record_attempt(pool: asyncpg.Pool, signature: str, legs: Sequence[str], retry_count: int) -> None:
    """What the racer did so far (legs that really sent, re-sends), for getSendStatus."""
    await pool.execute(
        "UPDATE sends SET legs = $2, retry_count = $3 WHERE signature = $1 AND status = 'pending'",
        signature,
        list(legs),
        retry_count,
    )


@postgres_call(WHAT)
async def settle(
    pool: asyncpg.Pool,
    signature: str,
    status: SendStatus,
    *,
    slot: int | None = None,
    error: str | None = None,
    settled_by: str = "racer",
) -> SendRecord | None:
    """Charge the outcome's price and release the hold; the record as settled (by this call or an
    earlier one), or None for an unknown signature. A landing (``confirmed``, ``failed``) at a ``slot``
    before the send's ``hold_slot`` is settled at its status with nothing charged (:func:`landed_before`)."""
    if status is SendStatus.PENDING:
        raise ValueError("a send is settled with its outcome, not pending")
    async with pool.acquire() as conn, conn.transaction():
        pubkey = await conn.fetchval("SELECT pubkey FROM sends WHERE signature = $1", signature)
        if pubkey is None:
            return None
        account = await lock_account(conn, pubkey)
        assert account is not None
        row = await conn.fetchrow("SELECT * FROM sends WHERE signature = $1 FOR UPDATE", signature)
        if row["status"] != SendStatus.PENDING:  # settled already: the first settlement stands
            return replace(_record(row), standing=(await holds(conn, pubkey, int(account["balance"])))[1])
        # docs/api.md, sendAndConfirm: the landing price when confirmed, the base fee for anything else
        # broadcast; only a preflight refusal (nothing broadcast) is free
        charged = (
            row["held"] if status is SendStatus.CONFIRMED else 0 if status is SendStatus.REFUSED else row["base_fee"]
        )
        landed = status in (SendStatus.CONFIRMED, SendStatus.FAILED)
        if charged and landed and landed_before(row["hold_slot"], slot):
            log.info(
                "send %s landed at slot %s, before its hold at slot %s: settled %s, nothing charged",
                signature,
                slot,
                row["hold_slot"],
                status.value,
            )
            charged = 0
        balance = int(account["balance"])
        now = datetime.now(UTC)  # the usage row's time, and so its day in the totals (migration 0027)
        if charged > 0:
            # No in-process low_balance hook after commit here (settle takes none): the event's
            # webhook jobs, which debit writes, are all a send's crossing announces.
            entry = Move("debit", -charged, f"sendAndConfirm {status.value}: {signature}", signature)
            balance = (await debit(conn, account, [entry])).balance
        await conn.execute(
            """INSERT INTO usage_history (pubkey, method, credits, request_id, refunded, created_at)
               VALUES ($1, 'sendAndConfirm', $2, $3, $4, $5)""",
            pubkey,
            charged,
            row["request_id"],
            charged == 0,
            now,
        )
        # usage totals (migration 0027): the row above, in the same transaction
        await add_totals(conn, pubkey, {(utc_day(now), "sendAndConfirm"): [charged, 1, int(charged == 0)]})
        settled = await conn.fetchrow(
            """UPDATE sends SET status = $2, charged = $3, slot = COALESCE($4, slot), error = $5,
                      settled_by = $6, settled_at = now()
               WHERE signature = $1 RETURNING *""",
            signature,
            status.value,
            charged,
            slot,
            error,
            settled_by,
        )
        _, standing = await holds(conn, pubkey, balance)
    return replace(_record(settled), standing=standing)


@postgres_call(WHAT)
async def find(pool: asyncpg.Pool, signature: str) -> SendRecord | None:
    row = await pool.fetchrow("SELECT * FROM sends WHERE signature = $1", signature)
    return None if row is None else _record(row)


@postgres_call(WHAT)
async def pending(pool: asyncpg.Pool, older_than_s: float, limit: int = 500) -> list[SendRecord]:
    """Pending sends held longer than ``older_than_s`` ago (the racer has given up on them), oldest first."""
    rows = await pool.fetch(
        """SELECT * FROM sends WHERE status = 'pending' AND created_at < now() - $1::float8 * interval '1 second'
           ORDER BY created_at LIMIT $2""",
        older_than_s,
        limit,
    )
    return [_record(r) for r in rows]


@postgres_call(WHAT)
async def purge_settled(pool: asyncpg.Pool, older_than_days: float, batch: int = 5_000) -> int:
    """Delete up to ``batch`` sends settled more than ``older_than_days`` ago; how many went.

    A pending send is never deleted, however old: its hold is still counted. The same transaction sent
    after its row went is a new send (docs/api.md, Sending), which the old landing does not charge
    again: it is at a slot before the new hold (:func:`landed_before`)."""
    tag = await pool.execute(
        """DELETE FROM sends WHERE signature IN (
               SELECT signature FROM sends
                WHERE status <> 'pending' AND settled_at < now() - $1::float8 * interval '1 day'
                LIMIT $2)""",
        float(older_than_days),
        batch,
    )
    return int(tag.split()[-1])


def _record(row: asyncpg.Record) -> SendRecord:
    return SendRecord(
        signature=row["signature"],
        pubkey=row["pubkey"],
        blockhash=row["blockhash"],
        held=int(row["held"]),
        base_fee=int(row["base_fee"]),
        status=SendStatus(row["status"]),
        charged=None if row["charged"] is None else int(row["charged"]),
        slot=row["slot"],
        error=row["error"],
        legs=list(row["legs"]),
        retry_count=int(row["retry_count"]),
        created_at=row["created_at"],
        settled_at=row["settled_at"],
        hold_slot=row["hold_slot"],
    )
