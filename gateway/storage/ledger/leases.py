"""Credit leases in PostgreSQL: holds a replica spends locally, and their settlement.

A lease holds part of an account's balance for one replica; the holds of live leases never exceed
the balance, so every call a replica admits from its lease is covered. Settlement charges usage in
one transaction under the account lock (see :mod:`gateway.storage.ledger`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import asyncpg

from gateway.core.credits import (
    EventHook,
    LeaseGrant,
    SettleResult,
    UsageRecord,
    fire,
    no_events,
    tally,
)
from gateway.core.webhook_events import LOW_BALANCE, low_balance
from gateway.storage.errors import postgres_call
from gateway.storage.ledger.cap import room
from gateway.storage.ledger.daily import add_totals, totals_of
from gateway.storage.ledger.moves import Move, debit
from gateway.storage.ledger.sql import holds, lock_account

log = logging.getLogger(__name__)

WHAT = "the credit ledger"


#: COPY, not INSERT ... unnest(arrays): asyncpg checks each array element for nesting, which made
#: the arrays cost more than the rest of a flush.
USAGE_COLUMNS = ("pubkey", "method", "credits", "request_id", "refunded", "created_at", "calls")


class OverspendError(Exception):
    """A replica tried to settle more than its lease granted: a bug, never silently accepted."""


def grant_size(available: int, want: int, at_least: int = 0, replicas: int = 1) -> int:
    """How much of ``available`` one replica may hold: ``want``, capped by a fair share of R replicas.

    Never less than ``at_least`` (the price at hand) unless that is not available, in which case
    nothing: holding credits that cannot pay for the call would only starve the other replicas.
    """
    if available <= 0 or available < at_least:
        return 0
    share = -(-available // max(1, replicas))
    return min(available, max(at_least, min(want, share)))


@postgres_call(WHAT)
async def lease(
    pool: asyncpg.Pool,
    pubkey: str,
    replica_id: str,
    want: int,
    ttl_s: float,
    *,
    at_least: int = 0,
    replicas: int = 1,
) -> LeaseGrant | None:
    """Reserve up to ``want`` credits for ``replica_id``; None when the account does not exist."""
    async with pool.acquire() as conn, conn.transaction():
        account = await lock_account(conn, pubkey)
        if account is None:
            return None
        held, standing = await holds(conn, pubkey, int(account["balance"]))
        available = standing.balance - held
        today = room(account, held)  # the daily spend cap's room: a lease never holds more
        capped = today is not None and today < available
        if capped:
            assert today is not None
            available = today
        suspended = account["status"] == "suspended"
        granted = 0 if suspended else grant_size(available, want, at_least, replicas)
        lease_id: int | None = None
        elsewhere = 0 if suspended or granted >= want else await leased_elsewhere(conn, pubkey, replica_id)
        if granted > 0:
            lease_id = await conn.fetchval(
                """INSERT INTO credit_leases (pubkey, replica_id, granted, expires_at)
                   VALUES ($1, $2, $3, now() + $4::float8 * interval '1 second') RETURNING id""",
                pubkey,
                replica_id,
                granted,
                float(ttl_s),
            )
    return LeaseGrant(
        lease_id,
        granted,
        int(account["balance"]),
        available - granted,
        account["rate_limit_rps"],
        account["concurrency_limit"],
        suspended,
        standing,
        elsewhere,
        capped,
    )


async def leased_elsewhere(conn: asyncpg.Connection, pubkey: str, replica_id: str) -> int:
    """Credits the live leases of other replicas hold and have not charged: what a recall could free
    (:mod:`gateway.credits.recall`). Read only for a lease request that fell short."""
    value = await conn.fetchval(
        """SELECT COALESCE(sum(granted - used), 0) FROM credit_leases
           WHERE pubkey = $1 AND replica_id <> $2 AND NOT released AND expires_at > now()""",
        pubkey,
        replica_id,
    )
    return int(value)


@postgres_call(WHAT)
async def settle(
    pool: asyncpg.Pool,
    lease_id: int,
    records: Sequence[UsageRecord],
    release: bool,
    *,
    seq: int | None = None,
    renew_ttl_s: float | None = None,
    shrink_to: int | None = None,
    events: EventHook = no_events,
) -> SettleResult:
    """Charge ``records`` against the lease and the balance in one transaction.

    The debit entries (one per method) cover every admitted call; one ``refund`` entry gives back the
    refunded ones, so refunds stay visible in the ledger. ``seq`` makes a retried flush harmless;
    ``renew_ttl_s`` extends a busy lease; ``shrink_to`` returns the unspent part of a lease that
    still has calls in flight; ``release`` ends the hold. Usage of an expired or released lease is
    dropped (logged): that only ever favours the customer, and is what a replica crash costs.
    """
    gross, refunded = tally(records)
    async with pool.acquire() as conn, conn.transaction():
        pubkey, account, row = await _lock_lease(conn, lease_id)
        balance_before = int(account["balance"])
        duplicate = seq is not None and seq <= row["flush_seq"]
        if duplicate:  # the first attempt committed; its answer was lost: apply the lease changes only
            records, gross, refunded = [], 0, 0
        if row["released"] or not row["live"]:
            if records:
                log.warning("lease %s of %s ended before settle: %d credits of usage dropped", lease_id, pubkey, gross)
            await conn.execute("UPDATE credit_leases SET released = true WHERE id = $1", lease_id)
            held, standing = await holds(conn, pubkey, balance_before)
            return SettleResult(False, balance_before, balance_before - held, 0, 0, duplicate, standing)
        used = int(row["used"]) + gross
        if used > row["granted"]:
            raise OverspendError(f"lease {lease_id}: {used} used of {row['granted']} granted")
        if records:
            await _record_usage(conn, pubkey, records)
        debited = await debit(conn, account, _moves(lease_id, records))
        balance_after = debited.balance
        granted = row["granted"] if shrink_to is None else max(used, min(int(row["granted"]), shrink_to))
        await _update_lease(conn, lease_id, used, granted, release, seq, renew_ttl_s)
        held, standing = await holds(conn, pubkey, balance_after)
    if debited.crossed_low:
        await fire(events, LOW_BALANCE, pubkey, low_balance(balance_after))
    return SettleResult(True, balance_after, balance_after - held, debited.charged, refunded, duplicate, standing)


async def _lock_lease(conn: asyncpg.Connection, lease_id: int) -> tuple[str, asyncpg.Record, asyncpg.Record]:
    """The lease's account row and the lease row, both locked (account first, as every writer does)."""
    pubkey = await conn.fetchval("SELECT pubkey FROM credit_leases WHERE id = $1", lease_id)
    if pubkey is None:
        raise LookupError(f"no credit lease {lease_id}")
    account = await lock_account(conn, pubkey)
    assert account is not None
    row = await conn.fetchrow(
        """SELECT granted, used, flush_seq, released, expires_at > now() AS live
           FROM credit_leases WHERE id = $1 FOR UPDATE""",
        lease_id,
    )
    return str(pubkey), account, row


async def _update_lease(
    conn: asyncpg.Connection,
    lease_id: int,
    used: int,
    granted: int,
    release: bool,
    seq: int | None,
    renew_ttl_s: float | None,
) -> None:
    await conn.execute(
        """UPDATE credit_leases SET used = $2, granted = $3, released = $4,
                  flush_seq = GREATEST(flush_seq, COALESCE($5, flush_seq)),
                  expires_at = CASE WHEN $6::float8 IS NULL THEN expires_at
                                    ELSE now() + $6::float8 * interval '1 second' END
           WHERE id = $1""",
        lease_id,
        used,
        granted,
        release,
        seq,
        renew_ttl_s,
    )


async def _record_usage(conn: asyncpg.Connection, pubkey: str, records: Sequence[UsageRecord]) -> None:
    """One usage row per record (a call, or a connection's deliveries), a refunded one at 0 credits."""
    await conn.copy_records_to_table(
        "usage_history",
        columns=USAGE_COLUMNS,
        records=[
            (pubkey, r.method, 0 if r.refunded else r.credits, r.request_id, r.refunded, r.at, r.calls) for r in records
        ],
    )
    # usage totals (migration 0027): one upsert per (day, method) of the flush, in its transaction
    await add_totals(conn, pubkey, totals_of(records))


def _moves(lease_id: int, records: Sequence[UsageRecord]) -> list[Move]:
    """The flush's ledger entries: a ``debit`` per method covering every admitted call, then one
    ``refund`` of the refunded ones, so refunds stay visible in the ledger (the debit consumes only the
    net: the refunded calls never left the batches)."""
    per_method: dict[str, list[int]] = {}
    refunds: dict[str, int] = {}
    for r in records:
        calls = per_method.setdefault(r.method, [0, 0])
        calls[0] += r.calls
        calls[1] += r.credits
        if r.refunded:
            refunds[r.method] = refunds.get(r.method, 0) + r.credits
    ref = f"lease:{lease_id}"
    moves = [
        Move("debit", -credits, f"{count} × {method}", ref)
        for method, (count, credits) in per_method.items()
        if credits > 0
    ]
    refunded = sum(refunds.values())
    if refunded > 0:
        detail = ", ".join(f"{m} {c}" for m, c in refunds.items())
        moves.append(Move("refund", refunded, f"refunded calls: {detail}", ref))
    return moves
