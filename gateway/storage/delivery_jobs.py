"""Webhook delivery jobs in PostgreSQL: claiming due jobs under a lease, recording what each attempt
did, and the charge of priced (signal) deliveries.

Table ``delivery_jobs`` (migrations 0001 and 0007), joined to ``webhooks``. A dispatcher
:func:`claim`\\ s due jobs of active subscriptions: each becomes ``delivering``, leased to that
dispatcher until ``locked_until``, its ``attempts`` counted. ``(locked_by, attempts)`` is the claim's
token: :func:`record` (and :func:`delivered`, :func:`retry_later`, :func:`dead`) change a job only
while it still carries the token, so an outcome that comes after the lease passed and another
dispatcher claimed the job again is dropped, never written over the newer attempt. A dispatcher that
dies leaves its jobs ``delivering``; the next claim after their lease passed puts them back.

Claims are serialised by one transaction-level advisory lock (a claim is one short transaction), so
the per-subscription cap counts every dispatcher's deliveries exactly. A claim reads the due jobs in
``next_attempt_at`` order and skips those of subscriptions that are not active or are at their cap:
due jobs of a paused subscription are stepped over by every claim until it is resumed (sources add
none to a paused one).

Priced jobs (signal deliveries, ``price > 0``) are charged by :func:`charge` before their first
attempt, once per job (``charged``), with a ``debit`` ledger entry under the account lock, as every
credit writer does (:mod:`gateway.storage.ledger`). An account that cannot pay pauses its
subscription (``paused``, ``paused_reason``) and the job goes back to ``pending``, its attempt not
counted: nothing was sent. A charged job that ends ``dead`` was never received: :func:`dead` gives the
charge back with a ``refund`` ledger entry in the same transaction (``charged`` back to 0, so a replay
of the dead job is charged again).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import TypeAlias

import asyncpg

from gateway.core.credits import EventHook, fire, no_events
from gateway.core.webhook_events import LOW_BALANCE, crosses_low_balance, low_balance
from gateway.storage import webhooks
from gateway.storage.errors import postgres_call
from gateway.storage.ledger.sql import add_entries, consume_batches, held, lock_account
from gateway.storage.webhook_events import enqueue_lifecycle

WHAT = "the webhook delivery queue"
#: A pool, or one connection taken from it and kept (:class:`HeldConnection`).
Db: TypeAlias = "asyncpg.Pool | asyncpg.Connection"
#: The advisory lock every claim takes (any constant: claims are the only ones to take it).
CLAIM_LOCK = 0x57EB0001
#: A claim looks at this many times ``limit`` due jobs, oldest first, to fill ``limit`` within the caps.
SCAN_FACTOR = 2


class Result(StrEnum):
    DELIVERED = "delivered"
    RETRY = "retry"  # back to pending, due after ``delay_s``
    DEAD = "dead"


class Charge(StrEnum):
    CHARGED = "charged"  # charged now
    PAID = "paid"  # nothing to charge: free, or charged by an earlier attempt
    UNPAID = "unpaid"  # the account cannot pay: the subscription is paused, the job pending again
    LOST = "lost"  # the claim is no longer this dispatcher's


@dataclass(frozen=True)
class ClaimedJob:
    id: int
    webhook_id: int
    pubkey: str  # the subscription's owner
    url: str
    secret: str  # the subscription's secret at the claim: each attempt is signed with the current one
    event_type: str
    payload: str  # the payload's JSON text
    created_at: datetime
    attempts: int  # including the attempt this claim is for: with ``locked_by``, the claim's token
    price: int
    charged: int


@dataclass(frozen=True)
class Outcome:
    """What one attempt of a claimed job came to."""

    job_id: int
    attempts: int  # the claim's ``attempts``
    result: Result
    http_status: int | None = None  # the receiver's answer, when it answered
    error: str | None = None
    excerpt: str | None = None  # the start of the receiver's body
    delay_s: float = 0.0  # RETRY: seconds until the next attempt


# A claim is three round trips under the claim lock: the lock with its settings and the release of
# passed leases, the claim itself, the commit. The due jobs are read in the due index's order from one
# table, so the scan stops after the window it needs however long the queue is; a subscription's
# status is a per-row check (a subquery, never a join that could reorder the scan), and subscriptions
# already at their cap are left out of the scan, so one with a long backlog cannot fill the window.
_PREPARE = f"""
SELECT pg_advisory_xact_lock({CLAIM_LOCK});
SET LOCAL enable_sort = off;
UPDATE delivery_jobs SET status = 'pending', locked_by = NULL, locked_until = NULL
WHERE status = 'delivering' AND locked_until < now();
"""
_CLAIM = """
WITH busy AS (
    SELECT webhook_id, count(*) AS n FROM delivery_jobs WHERE status = 'delivering' GROUP BY webhook_id
), due AS (
    SELECT j.id, j.webhook_id, j.next_attempt_at FROM delivery_jobs j
    WHERE j.status = 'pending' AND j.next_attempt_at <= now()
      AND j.webhook_id NOT IN (SELECT webhook_id FROM busy WHERE n >= $4::int)
      AND (SELECT w.status FROM webhooks w WHERE w.id = j.webhook_id) = 'active'
    ORDER BY j.next_attempt_at
    LIMIT $3::int * $5::int
    FOR UPDATE OF j SKIP LOCKED
), picked AS (
    SELECT id FROM (
        SELECT d.id, d.next_attempt_at,
               COALESCE((SELECT b.n FROM busy b WHERE b.webhook_id = d.webhook_id), 0)
               + row_number() OVER (PARTITION BY d.webhook_id ORDER BY d.next_attempt_at, d.id) AS slot
        FROM due d
    ) ranked
    WHERE slot <= $4::int
    ORDER BY next_attempt_at, id
    LIMIT $3::int
)
UPDATE delivery_jobs j
SET status = 'delivering', locked_by = $1, locked_until = now() + $2::float8 * interval '1 second',
    attempts = j.attempts + 1
FROM picked p, webhooks w
WHERE j.id = p.id AND w.id = j.webhook_id
RETURNING j.id, j.webhook_id, w.pubkey, w.url, w.secret, j.event_type, j.payload::text AS payload, j.created_at,
          j.attempts, j.price, j.charged
"""

_RECORD = """
UPDATE delivery_jobs j
SET status = CASE u.result WHEN 'retry' THEN 'pending' ELSE u.result END,
    next_attempt_at = CASE WHEN u.result = 'retry' THEN now() + u.delay * interval '1 second'
                           ELSE j.next_attempt_at END,
    delivered_at = CASE WHEN u.result = 'delivered' THEN now() ELSE j.delivered_at END,
    last_status = u.http_status, last_error = u.error, response_excerpt = u.excerpt,
    locked_by = NULL, locked_until = NULL
FROM unnest($2::bigint[], $3::int[], $4::text[], $5::float8[], $6::int[], $7::text[], $8::text[])
     AS u(id, attempts, result, delay, http_status, error, excerpt)
WHERE j.id = u.id AND j.status = 'delivering' AND j.locked_by = $1 AND j.attempts = u.attempts
      AND (u.result <> 'dead' OR j.charged = 0)
RETURNING j.id
"""


class HeldConnection:
    """One pool connection a dispatcher's loop keeps for its statements: no acquire, and no reset of
    the session (a round trip of its own), per statement. After a failure it is given back (the
    pool closes a broken one) and the next :meth:`get` takes another."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self._conn: asyncpg.Connection | None = None

    @postgres_call(WHAT)
    async def get(self) -> asyncpg.Connection:
        if self._conn is None:
            self._conn = await self._pool.acquire()
        return self._conn

    async def drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await self._pool.release(conn)


@asynccontextmanager
async def _connection(db: Db) -> AsyncIterator[asyncpg.Connection]:
    """A connection of ``db``: the pool's for the block, or ``db`` itself when it is one."""
    if isinstance(db, asyncpg.Pool):
        async with db.acquire() as conn:
            yield conn
    else:
        yield db


@postgres_call(WHAT)
async def claim(db: Db, dispatcher_id: str, limit: int, lease_s: float, per_webhook: int) -> list[ClaimedJob]:
    """Lease up to ``limit`` due jobs of active subscriptions to ``dispatcher_id`` for ``lease_s``.

    Due: ``pending`` with ``next_attempt_at`` passed, or ``delivering`` under a lease that passed (its
    dispatcher died or stalled; the attempt it made counts). At most ``per_webhook`` jobs of one
    subscription are ``delivering`` at once, counting those already out, so one slow receiver cannot
    take every slot. Oldest due first.
    """
    if limit <= 0:
        return []
    async with _connection(db) as conn:
        try:
            # A queue grows faster than autovacuum re-analyses it: with statistics from when it was
            # short, the planner sorts every due job instead of reading the due index in order (11 ms
            # instead of 0.7 ms for a window of 128 in a queue of 10,000, measured): enable_sort off.
            await conn.execute("BEGIN;" + _PREPARE)
            rows = await conn.fetch(_CLAIM, dispatcher_id, float(lease_s), limit, per_webhook, SCAN_FACTOR)
            await conn.execute("COMMIT")
        except BaseException:
            if not conn.is_closed():
                with contextlib.suppress(Exception):
                    await conn.execute("ROLLBACK")
            raise
    return sorted((_claimed(r) for r in rows), key=lambda job: job.id)


@postgres_call(WHAT)
async def record(db: Db, dispatcher_id: str, outcomes: Sequence[Outcome]) -> set[int]:
    """Record ``outcomes`` of ``dispatcher_id``'s claims; the ids of the jobs it still held (the others
    were claimed again after their lease passed, or cancelled: their outcome is dropped).

    Delivered and retried jobs, and dead ones never charged, are written in one statement; a dead job
    that was charged is written in a transaction of its own that refunds the charge.
    """
    written: set[int] = set()
    charged_dead: list[Outcome] = []
    if outcomes:
        rows = await db.fetch(
            _RECORD,
            dispatcher_id,
            [o.job_id for o in outcomes],
            [o.attempts for o in outcomes],
            [o.result.value for o in outcomes],
            [o.delay_s for o in outcomes],
            [o.http_status for o in outcomes],
            [o.error for o in outcomes],
            [o.excerpt for o in outcomes],
        )
        written = {int(r["id"]) for r in rows}
        charged_dead = [o for o in outcomes if o.result is Result.DEAD and o.job_id not in written]
    for outcome in charged_dead:
        if await _dead_refunded(db, dispatcher_id, outcome):
            written.add(outcome.job_id)
    return written


@postgres_call(WHAT)
async def release(pool: asyncpg.Pool, dispatcher_id: str, jobs: Sequence[ClaimedJob]) -> int:
    """Give back claimed jobs that were never attempted (a dispatcher stopping): ``pending`` again, due
    as they were, the claim's attempt uncounted; how many were still this dispatcher's."""
    if not jobs:
        return 0
    done = await pool.execute(
        """UPDATE delivery_jobs j
           SET status = 'pending', attempts = j.attempts - 1, locked_by = NULL, locked_until = NULL
           FROM unnest($2::bigint[], $3::int[]) AS u(id, attempts)
           WHERE j.id = u.id AND j.status = 'delivering' AND j.locked_by = $1 AND j.attempts = u.attempts""",
        dispatcher_id,
        [job.id for job in jobs],
        [job.attempts for job in jobs],
    )
    return int(done.rsplit(" ", 1)[-1])


async def delivered(
    pool: asyncpg.Pool, dispatcher_id: str, job_id: int, attempts: int, http_status: int, excerpt: str | None = None
) -> bool:
    """The receiver took the job (2xx); False when the claim was no longer this dispatcher's."""
    outcome = Outcome(job_id, attempts, Result.DELIVERED, http_status=http_status, excerpt=excerpt)
    return job_id in await record(pool, dispatcher_id, [outcome])


async def retry_later(
    pool: asyncpg.Pool,
    dispatcher_id: str,
    job_id: int,
    attempts: int,
    delay_s: float,
    error: str,
    http_status: int | None = None,
    excerpt: str | None = None,
) -> bool:
    """The attempt failed and another is due in ``delay_s``; False when the claim was lost."""
    outcome = Outcome(job_id, attempts, Result.RETRY, http_status, error, excerpt, delay_s)
    return job_id in await record(pool, dispatcher_id, [outcome])


async def dead(
    pool: asyncpg.Pool,
    dispatcher_id: str,
    job_id: int,
    attempts: int,
    error: str,
    http_status: int | None = None,
    excerpt: str | None = None,
) -> bool:
    """No attempt will follow (refused target, a final answer, attempts exhausted); a charge is
    refunded. False when the claim was lost."""
    outcome = Outcome(job_id, attempts, Result.DEAD, http_status, error, excerpt)
    return job_id in await record(pool, dispatcher_id, [outcome])


@postgres_call(WHAT)
async def _dead_refunded(db: Db, dispatcher_id: str, outcome: Outcome) -> bool:
    async with _connection(db) as conn, conn.transaction():
        pubkey = await conn.fetchval(
            "SELECT w.pubkey FROM delivery_jobs j JOIN webhooks w ON w.id = j.webhook_id WHERE j.id = $1",
            outcome.job_id,
        )
        if pubkey is None:
            return False
        account = await lock_account(conn, pubkey)  # the account first, as every credit writer
        job = await conn.fetchrow(
            """SELECT charged FROM delivery_jobs
               WHERE id = $1 AND status = 'delivering' AND locked_by = $2 AND attempts = $3 FOR UPDATE""",
            outcome.job_id,
            dispatcher_id,
            outcome.attempts,
        )
        if job is None:
            return False
        refund = int(job["charged"])
        if refund > 0 and account is not None:
            balance = int(account["balance"]) + refund
            description = f"webhook delivery {outcome.job_id} failed: charge returned"
            await add_entries(conn, pubkey, [("refund", refund, balance, description, f"delivery:{outcome.job_id}")])
            await _restore_batches(conn, pubkey, refund)
            await conn.execute(
                "UPDATE accounts SET balance = $2, total_consumed = total_consumed - $3 WHERE pubkey = $1",
                pubkey,
                balance,
                refund,
            )
        await conn.execute(
            """UPDATE delivery_jobs SET status = 'dead', charged = 0, last_status = $2, last_error = $3,
                      response_excerpt = $4, locked_by = NULL, locked_until = NULL
               WHERE id = $1""",
            outcome.job_id,
            outcome.http_status,
            outcome.error,
            outcome.excerpt,
        )
    return True


async def _restore_batches(conn: asyncpg.Connection, pubkey: str, amount: int) -> None:
    """Put ``amount`` back into the account's batches, latest-expiring first (the reverse of
    :func:`gateway.storage.ledger.sql.consume_batches`). There is always room: the batches were
    granted every credit the balance ever held, and a charge took ``amount`` out of them. A batch
    past its expiry that takes some back gives it up at the next expiry pass."""
    await conn.execute(
        """UPDATE credit_batches c
           SET remaining = c.remaining + LEAST(c.granted - c.remaining, $2 - (b.cum - (c.granted - c.remaining)))
           FROM (SELECT id, sum(granted - remaining) OVER (ORDER BY expires_at DESC, id DESC) AS cum
                 FROM credit_batches WHERE pubkey = $1 AND remaining < granted) b
           WHERE c.id = b.id AND b.cum - (c.granted - c.remaining) < $2""",
        pubkey,
        amount,
    )


@postgres_call(WHAT)
async def charge(pool: asyncpg.Pool, dispatcher_id: str, job: ClaimedJob, events: EventHook = no_events) -> Charge:
    """Charge a claimed job's price before its attempt, once per job.

    What the account can spend is its balance less what live credit leases and pending sends hold
    (:func:`gateway.storage.ledger.sql.held`). When that is less than the price (or the account is
    suspended or gone) nothing is charged or sent: the subscription is paused with the reason, and
    the job is ``pending`` again with this attempt uncounted, to go out once the owner resumes it.
    A charge that takes the balance below the low-balance line writes the ``low_balance`` event's jobs
    in the same transaction, as every deduction does (and calls ``events`` after the commit).
    """
    if job.price <= 0 or job.charged > 0:
        return Charge.PAID
    async with pool.acquire() as conn, conn.transaction():
        account = await lock_account(conn, job.pubkey)
        row = await conn.fetchrow(
            """SELECT price, charged FROM delivery_jobs
               WHERE id = $1 AND status = 'delivering' AND locked_by = $2 AND attempts = $3 FOR UPDATE""",
            job.id,
            dispatcher_id,
            job.attempts,
        )
        if row is None:
            return Charge.LOST
        price = int(row["price"])
        if price <= 0 or row["charged"] > 0:
            return Charge.PAID
        available = 0 if account is None else int(account["balance"]) - await held(conn, job.pubkey)
        if account is None or account["status"] == "suspended" or available < price:
            await _pause_unpaid(conn, job, price, available)
            return Charge.UNPAID
        balance = int(account["balance"]) - price
        ref = f"delivery:{job.id}"
        description = f"webhook delivery {job.id} ({job.event_type})"
        await add_entries(conn, job.pubkey, [("debit", -price, balance, description, ref)])
        await consume_batches(conn, job.pubkey, price)
        crossed = crosses_low_balance(price, balance, account["low_balance_notified"])
        await conn.execute(
            """UPDATE accounts SET balance = $2, total_consumed = total_consumed + $3,
                      low_balance_notified = low_balance_notified OR $4
               WHERE pubkey = $1""",
            job.pubkey,
            balance,
            price,
            crossed,
        )
        if crossed:
            await enqueue_lifecycle(conn, job.pubkey, LOW_BALANCE, low_balance(balance))
        await conn.execute("UPDATE delivery_jobs SET charged = $2 WHERE id = $1", job.id, price)
    if crossed:
        await fire(events, LOW_BALANCE, job.pubkey, low_balance(balance))
    return Charge.CHARGED


async def _pause_unpaid(conn: asyncpg.Connection, job: ClaimedJob, price: int, available: int) -> None:
    reason = f"insufficient credits: a delivery costs {price}, {max(available, 0)} available"
    await webhooks.pause(conn, job.webhook_id, reason)
    await conn.execute(
        """UPDATE delivery_jobs SET status = 'pending', attempts = attempts - 1, locked_by = NULL,
                  locked_until = NULL, last_error = $2
           WHERE id = $1""",
        job.id,
        reason,
    )


def _claimed(row: asyncpg.Record) -> ClaimedJob:
    return ClaimedJob(
        id=int(row["id"]),
        webhook_id=int(row["webhook_id"]),
        pubkey=row["pubkey"],
        url=row["url"],
        secret=row["secret"],
        event_type=row["event_type"],
        payload=row["payload"],
        created_at=row["created_at"],
        attempts=int(row["attempts"]),
        price=int(row["price"]),
        charged=int(row["charged"]),
    )


#: Statuses a job never leaves by itself (a dead one only by a replay, which its owner asks for).
FINISHED = ("delivered", "dead", "cancelled")


@postgres_call(WHAT)
async def purge_finished(pool: asyncpg.Pool, older_than_days: float, batch: int = 5_000) -> int:
    """Delete up to ``batch`` finished jobs created more than ``older_than_days`` ago; how many went.

    Pending and delivering jobs are never deleted, however old. A job's dedupe key goes with it, which
    is safe: the sources' cursors only move forward, so nothing offers that signature again."""
    tag = await pool.execute(
        """DELETE FROM delivery_jobs WHERE id IN (
               SELECT id FROM delivery_jobs
                WHERE status = ANY($1::text[]) AND created_at < now() - $2::float8 * interval '1 day'
                LIMIT $3)""",
        list(FINISHED),
        float(older_than_days),
        batch,
    )
    return int(tag.split()[-1])
