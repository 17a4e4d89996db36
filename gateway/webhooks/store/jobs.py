"""Webhook delivery jobs in PostgreSQL: claiming due jobs under a lease, recording what each attempt
did, and the charge of paid deliveries.

Table ``delivery_jobs`` (migrations 0001, 0007, 0010 and 0028), joined to ``webhooks``. A dispatcher
:func:`claim`\\ s due jobs of active subscriptions: each becomes ``delivering``, leased to that
dispatcher until ``locked_until``, its ``attempts`` counted. ``(locked_by, attempts)`` is the claim's
token: :func:`record` (and :func:`delivered`, :func:`retry_later`, :func:`dead`) change a job only
while it still carries the token, so an outcome that comes after the lease passed and another
dispatcher claimed the job again is dropped, never written over the newer attempt. A dispatcher that
dies leaves its jobs ``delivering``; the next claim after their lease passed puts them back.

Claims are serialised by one transaction-level advisory lock (a claim is one short statement), so
the caps count every dispatcher's deliveries exactly: at most ``per_webhook`` jobs of one subscription
and ``per_account`` of one account's subscriptions together are out at once. A claim reads the due
jobs in ``next_attempt_at`` order and skips those of subscriptions that are not active or whose
subscription or account is at its cap: due jobs of a paused subscription are stepped over by every
claim until it is resumed (sources add none to a paused one).

Paid jobs (transaction and signal deliveries, ``price > 0``) are charged by :func:`charge` before their
first attempt, once per job (``charged``), with a ``debit`` ledger entry under the account lock, as
every credit writer does (:func:`gateway.storage.ledger.moves.debit`). An account that cannot pay pauses its
subscription (``paused``, ``paused_reason``) and the job goes back to ``pending``, its attempt not
counted: nothing was sent. An attempt whose request reached the receiver (the dispatcher had a
connection to it and wrote the request on it) marks the job ``sent``, and one the receiver answered
(any HTTP status) ``answered`` too: the event was received and its charge stays, however the job ends,
and no retry is charged again. A charged job that ends ``dead`` never sent (every attempt a DNS, connect
or TLS failure, or a refused address) was never received: :func:`dead` gives the charge back with a
``refund`` ledger entry in the same transaction (``charged`` back to 0, so a replay of the dead job is
charged again). A receiver that reads each delivery and drops the connection unanswered gets nothing back.

Each outcome stamps the job's ``last_attempt_at`` in the same statement. Each outcome also moves the
subscription's ``consecutive_dead`` in its own statement: a delivered job
resets it, a dead one adds one, and at ``pause_after`` the subscription is paused with the reason, so
the next claim already skips it (docs/api.md, Deliveries).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Collection, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import TypeAlias

import asyncpg

from gateway.core.credits import EventHook, fire, no_events
from gateway.core.webhook_events import LOW_BALANCE, low_balance
from gateway.credits.errors import SPEND_CAP_MESSAGE
from gateway.storage.errors import postgres_call
from gateway.storage.ledger.cap import room
from gateway.storage.ledger.moves import Move, debit
from gateway.storage.ledger.sql import held, lock_account
from gateway.webhooks.store import subscriptions as webhooks
from gateway.webhooks.store.refunds import Refund, refund_deliveries

WHAT = "the webhook delivery queue"
#: A pool, or one connection taken from it and kept (:class:`HeldConnection`).
Db: TypeAlias = "asyncpg.Pool | asyncpg.Connection"
#: A claim looks at this many times ``limit`` due jobs, oldest first, to fill ``limit`` within the caps.
SCAN_FACTOR = 2
#: ``per_account`` when an account's deliveries are not capped (an int4 the claim can compare).
NO_ACCOUNT_CAP = 2**31 - 1


class Result(StrEnum):
    DELIVERED = "delivered"
    RETRY = "retry"  # back to pending, due after ``delay_s``
    DEAD = "dead"


class Charge(StrEnum):
    CHARGED = "charged"  # charged now
    PAID = "paid"  # nothing to charge: free, or charged by an earlier attempt
    UNPAID = "unpaid"  # the account cannot pay: the subscription is paused, the job pending again
    LOST = "lost"  # the claim is no longer this dispatcher's


@dataclass(frozen=True, slots=True)
class ClaimRules:
    """How :func:`claim` and :func:`exchange` lease jobs (a dispatcher's are fixed by its config)."""

    lease_s: float  # how long a claim is the dispatcher's
    per_webhook: int  # jobs out at once to one subscription, over all dispatchers
    per_account: int | None = None  # to one account's subscriptions together (None: no such cap)
    total_slots: int | None = None  # every dispatcher's delivery slots (None: the claim's limit)


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
    suspended: bool = False  # the account was suspended at the claim (then a free job is not sent either)


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
    sent: bool = False  # the request reached the receiver: a connection was had and it was written on it
    # (an answer implies it)


#: Why a subscription was paused after too many dead deliveries (a ``format()`` of the count, the last
#: error and its id; ``write_delivery_outcomes`` of migration 0029 writes it).
PAUSE_REASON = "%s deliveries in a row ended dead (the last: %s): fix the receiver, then POST /webhooks/%s/resume"

#: The outcomes and the dead-in-a-row streaks of their subscriptions, in one statement (migration 0029); a
#: dead job that was charged and never sent is left to :func:`_dead_refunded` (its refund needs the account
#: lock, taken before any job's).
_RECORD = "SELECT * FROM write_delivery_outcomes($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
#: Outcomes written, then jobs claimed, in one round trip (migration 0029, read in ``claim.sql``): :func:`exchange`.
_EXCHANGE = (
    "SELECT * FROM claim_delivery_jobs($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)"
)
#: The outcome of an attempt that was under way when its job was cancelled: the job shows what the
#: receiver answered (``delivered`` when it took it) and whether it was sent. The cancel left its charge
#: to this outcome: one charged and never sent is refunded by :func:`_refund_unsent` (the rows returned).
_LATE = """
UPDATE delivery_jobs j
SET status = CASE WHEN u.result = 'delivered' THEN 'delivered' ELSE j.status END,
    delivered_at = CASE WHEN u.result = 'delivered' THEN now() ELSE j.delivered_at END,
    last_status = u.http_status, last_error = u.error, response_excerpt = u.excerpt, last_attempt_at = now(),
    answered = j.answered OR u.http_status IS NOT NULL,
    sent = j.sent OR u.sent OR u.http_status IS NOT NULL
FROM unnest($1::bigint[], $2::int[], $3::text[], $4::int[], $5::text[], $6::text[], $7::bool[])
     AS u(id, attempts, result, http_status, error, excerpt, sent)
WHERE j.id = u.id AND j.status = 'cancelled' AND j.locked_by IS NULL AND j.attempts = u.attempts
RETURNING j.id, j.charged > 0 AND NOT j.sent AS unsent
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
async def claim(
    db: Db, dispatcher_id: str, limit: int, rules: ClaimRules, finished: Collection[tuple[int, int]] = ()
) -> list[ClaimedJob]:
    """Lease up to ``limit`` due jobs of active subscriptions to ``dispatcher_id`` for ``rules.lease_s``.

    Due: ``pending`` with ``next_attempt_at`` passed, or ``delivering`` under a lease that passed (its
    dispatcher died or stalled; the attempt it made counts). At most ``rules.per_webhook`` jobs of one
    subscription, and ``rules.per_account`` of one account's subscriptions together (None: no such cap), are
    ``delivering`` at once, counting those already out, so one slow receiver, or one account's, cannot
    take every slot. Oldest due first. ``finished``: ``(job id, attempts)`` of ``dispatcher_id``'s claims
    whose attempt is over and whose outcome is not written yet; not out to their receiver, they hold no
    slot (a job is left out of the count only while it still carries that claim). A dispatcher has its
    outcomes written by its claims instead (:func:`exchange`), so a failed one holds its slot until its
    outcome moves the streak.

    ``rules.total_slots``: the delivery slots of every dispatcher together (None: ``limit``). An account's
    share is then at most ``total_slots / (accounts + 1)`` as well, ``accounts`` counting those with
    deliveries out or due in the claim's window (migration 0018): whatever any number of accounts'
    receivers do, a share stays free for one more account (docs/api.md, Deliveries). The claim also
    parks due jobs of paused subscriptions (``next_attempt_at`` infinity), so later claims do not step
    over them; a resume, or :func:`unpark`, makes them due again. It finds them from the paused
    subscriptions, not from the queue (migration 0024): with none paused it reads one index page.

    One round trip: the claim is the server-side function ``claim_delivery_jobs`` (migrations 0016, 0024,
    0029; its live definition is read in ``claim.sql`` beside this module), which takes the claim lock,
    puts back jobs whose lease passed, and claims, and whose commit does not wait for the WAL flush (a
    claim lost in a crash only delivers its jobs again; so ``db`` must not be inside a transaction of the
    caller's, whose commit would not wait either). The due jobs are
    read in the due index's order from one table, so the scan stops after the window it needs however
    long the queue is; subscriptions at their cap and those of accounts at theirs are left out of the scan
    (a per-row check, never a join that could reorder the scan), so one with a long backlog cannot fill
    the window. The window's subscriptions are then looked up once each (active ones only, with their
    owner), and the window cut to each subscription's cap, then to each account's.
    """
    if limit <= 0:
        return []
    jobs, _ = await _exchange(db, dispatcher_id, (), 0, limit, rules, finished)
    return jobs


@postgres_call(WHAT)
async def exchange(
    db: Db,
    dispatcher_id: str,
    outcomes: Sequence[Outcome],
    pause_after: int,
    limit: int,
    rules: ClaimRules,
) -> tuple[list[ClaimedJob], set[int]]:
    """Write ``outcomes`` as :func:`record` does, then claim up to ``limit`` jobs as :func:`claim` does
    (none when ``limit`` is 0), in one round trip and one transaction (migration 0029): the claimed jobs,
    and the ids of the outcomes written. The claim counts the slots the outcomes free. The outcomes not
    written are for :func:`settle` (a dead job to refund, one whose job was cancelled) or were lost (their
    lease passed and the job was claimed again). As a claim's, the commit does not wait for the WAL flush:
    an outcome lost in a crash leaves its job leased, and it is delivered again once the lease passes."""
    return await _exchange(db, dispatcher_id, outcomes, pause_after, limit, rules, ())


async def _exchange(
    db: Db,
    dispatcher_id: str,
    outcomes: Sequence[Outcome],
    pause_after: int,
    limit: int,
    rules: ClaimRules,
    finished: Collection[tuple[int, int]],
) -> tuple[list[ClaimedJob], set[int]]:
    per_account = rules.per_account
    rows = await db.fetch(
        _EXCHANGE,
        dispatcher_id,
        float(rules.lease_s),
        max(0, limit),
        rules.per_webhook,
        SCAN_FACTOR,
        NO_ACCOUNT_CAP if per_account is None else per_account,
        [job_id for job_id, _ in finished],
        [attempts for _, attempts in finished],
        NO_ACCOUNT_CAP if per_account is None else min(NO_ACCOUNT_CAP, rules.total_slots or limit),  # no cap: no share
        *_outcome_arrays(outcomes),
        pause_after,
    )
    written: set[int] = set()
    jobs: list[ClaimedJob] = []
    for row in rows:
        if row["written"]:
            written.add(row["id"])
        else:
            jobs.append(_claimed(row))
    jobs.sort(key=lambda job: job.id)
    return jobs, written


def _outcome_arrays(
    outcomes: Sequence[Outcome],
) -> tuple[
    list[int], list[int], list[str], list[float], list[int | None], list[str | None], list[str | None], list[bool]
]:
    """``outcomes`` as write_delivery_outcomes' arrays (ids, attempts, results, delays, statuses, errors,
    excerpts, sent)."""
    return (
        [o.job_id for o in outcomes],
        [o.attempts for o in outcomes],
        [o.result.value for o in outcomes],
        [o.delay_s for o in outcomes],
        [o.http_status for o in outcomes],
        [o.error for o in outcomes],
        [o.excerpt for o in outcomes],
        [o.sent for o in outcomes],
    )


@postgres_call(WHAT)
async def record(db: Db, dispatcher_id: str, outcomes: Sequence[Outcome], pause_after: int = 0) -> set[int]:
    """Record ``outcomes`` of ``dispatcher_id``'s claims; the ids of the jobs it still held (the others
    were claimed again after their lease passed, or cancelled: their outcome is dropped).

    Every outcome is written in one statement with the streaks of dead deliveries it moves (a
    subscription reaching ``pause_after`` in a row is paused; 0: never), except a dead job that was
    charged and never sent: that one is written in a transaction of its own that refunds the charge.
    An attempt whose job was cancelled while it was on its way (its webhook deleted) is written on the
    cancelled job, and counts as written: the receiver may have taken it (docs/api.md, Delete); the
    cancel left its charge to this attempt, refunded now if no attempt of the job was sent.
    """
    written: set[int] = set()
    if outcomes:
        rows = await db.fetch(_RECORD, dispatcher_id, *_outcome_arrays(outcomes), pause_after)
        written = {row[0] for row in rows}
    return await _settle(db, dispatcher_id, outcomes, written, pause_after)


@postgres_call(WHAT)
async def settle(
    db: Db, dispatcher_id: str, outcomes: Sequence[Outcome], written: set[int], pause_after: int = 0
) -> set[int]:
    """The part of :func:`record` that :func:`exchange` leaves: of ``outcomes``, those not in ``written``
    that are dead jobs to refund, or attempts of jobs cancelled meanwhile, written as :func:`record` says;
    the ids written, ``written``'s included."""
    return await _settle(db, dispatcher_id, outcomes, written, pause_after)


async def _settle(
    db: Db, dispatcher_id: str, outcomes: Sequence[Outcome], written: set[int], pause_after: int
) -> set[int]:
    written = set(written)
    refunding = [o for o in outcomes if o.result is Result.DEAD and o.job_id not in written]
    for outcome in refunding:
        if await _dead_refunded(db, dispatcher_id, outcome, pause_after):
            written.add(outcome.job_id)
    late = [o for o in outcomes if o.job_id not in written]
    if late:
        ids, attempts, results, _delays, statuses, errors, excerpts, sent = _outcome_arrays(late)
        rows = await db.fetch(_LATE, ids, attempts, results, statuses, errors, excerpts, sent)
        written.update(int(r["id"]) for r in rows)
        for row in rows:
            if row["unsent"]:
                await _refund_unsent(db, int(row["id"]))
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
    sent: bool = False,
) -> bool:
    """The attempt failed and another is due in ``delay_s``; False when the claim was lost."""
    outcome = Outcome(job_id, attempts, Result.RETRY, http_status, error, excerpt, delay_s, sent)
    return job_id in await record(pool, dispatcher_id, [outcome])


async def dead(
    pool: asyncpg.Pool,
    dispatcher_id: str,
    job_id: int,
    attempts: int,
    error: str,
    http_status: int | None = None,
    excerpt: str | None = None,
    sent: bool = False,
) -> bool:
    """No attempt will follow (refused target, a final answer, attempts exhausted); a charge is
    refunded when no attempt was sent (``sent``, or answered: ``http_status``). False when the claim
    was lost."""
    outcome = Outcome(job_id, attempts, Result.DEAD, http_status, error, excerpt, sent=sent)
    return job_id in await record(pool, dispatcher_id, [outcome])


@postgres_call(WHAT)
async def _dead_refunded(db: Db, dispatcher_id: str, outcome: Outcome, pause_after: int) -> bool:
    """Write a dead outcome of a charged job: its charge refunded unless some attempt was sent (then
    the receiver got it, and it stays charged); its subscription's streak moved."""
    async with _connection(db) as conn, conn.transaction():
        pubkey = await conn.fetchval(
            "SELECT w.pubkey FROM delivery_jobs j JOIN webhooks w ON w.id = j.webhook_id WHERE j.id = $1",
            outcome.job_id,
        )
        if pubkey is None:
            return False
        account = await lock_account(conn, pubkey)  # the account first, as every credit writer
        job = await conn.fetchrow(
            """SELECT charged, sent FROM delivery_jobs
               WHERE id = $1 AND status = 'delivering' AND locked_by = $2 AND attempts = $3 FOR UPDATE""",
            outcome.job_id,
            dispatcher_id,
            outcome.attempts,
        )
        if job is None:
            return False
        sent = bool(job["sent"]) or outcome.sent or outcome.http_status is not None
        charged = int(job["charged"])
        if charged > 0 and not sent:
            assert account is not None, f"a charged delivery of {pubkey}, who has no account"
            await refund_deliveries(conn, account, [Refund(outcome.job_id, charged, _never_sent(outcome.job_id))])
            await conn.execute("UPDATE delivery_jobs SET charged = 0 WHERE id = $1", outcome.job_id)
        # Now paid for or refunded: written with its streak as any outcome.
        await conn.fetch(_RECORD, dispatcher_id, *_outcome_arrays([outcome]), pause_after)
    return True


def _never_sent(job_id: int) -> str:
    return f"webhook delivery {job_id} never reached the receiver: charge returned"


@postgres_call(WHAT)
async def _refund_unsent(db: Db, job_id: int) -> None:
    """Refund a cancelled job's charge when no attempt of it was sent (its last attempt's outcome came
    after the cancel); nothing when another writer refunded it first."""
    async with _connection(db) as conn, conn.transaction():
        pubkey = await conn.fetchval(
            "SELECT w.pubkey FROM delivery_jobs j JOIN webhooks w ON w.id = j.webhook_id WHERE j.id = $1", job_id
        )
        account = await lock_account(conn, pubkey)  # the account first, as every credit writer
        charged = await conn.fetchval(
            "SELECT charged FROM delivery_jobs WHERE id = $1 AND status <> 'delivering' AND NOT sent FOR UPDATE",
            job_id,
        )
        if not charged:
            return
        assert account is not None, f"a charged delivery of {pubkey}, who has no account"
        await refund_deliveries(conn, account, [Refund(job_id, int(charged), _never_sent(job_id))])
        await conn.execute("UPDATE delivery_jobs SET charged = 0 WHERE id = $1", job_id)


@postgres_call(WHAT)
async def charge(pool: asyncpg.Pool, dispatcher_id: str, job: ClaimedJob, events: EventHook = no_events) -> Charge:
    """:func:`charge_each` of one job."""
    return (await charge_each(pool, dispatcher_id, [job], events))[job.id]


async def charge_each(
    pool: asyncpg.Pool, dispatcher_id: str, jobs: Sequence[ClaimedJob], events: EventHook = no_events
) -> dict[int, Charge]:
    """Charge claimed jobs their price before their attempt, once per job; each job's :class:`Charge`.

    One transaction per account, accounts and jobs in id order: the jobs' ``debit`` entries, one each
    (``delivery:<id>``), written as one move of the balance. A job is decided as if charged alone
    after the ones before it: what the account can spend is its balance less what live credit leases
    and pending sends hold (:func:`gateway.storage.ledger.sql.held`); when that is less than the
    price (or the account is suspended or gone) that job is not charged or sent: its subscription is
    paused with the reason, the job ``pending`` again with this attempt uncounted, to go out once the
    owner resumes it; past the account's daily spend cap it waits for the next UTC day. A charge that
    takes the balance below the low-balance line writes the ``low_balance`` event's jobs in the same
    transaction, as every deduction does (and calls ``events`` after the commit).
    """
    charges = {job.id: Charge.PAID for job in jobs if job.charged > 0}
    accounts: dict[str, list[ClaimedJob]] = {}
    for job in sorted(jobs, key=lambda j: j.id):
        if job.id in charges:
            continue
        if job.price <= 0:  # a free (lifecycle) delivery: still none for a suspended account
            charges[job.id] = await _free(pool, dispatcher_id, job)
        else:
            accounts.setdefault(job.pubkey, []).append(job)
    for pubkey in sorted(accounts):
        charges.update(await _charge_account(pool, dispatcher_id, pubkey, accounts[pubkey], events))
    return charges


async def _charge_account(
    pool: asyncpg.Pool, dispatcher_id: str, pubkey: str, jobs: list[ClaimedJob], events: EventHook
) -> dict[int, Charge]:
    charges: dict[int, Charge] = {}
    async with pool.acquire() as conn, conn.transaction():
        account = await lock_account(conn, pubkey)
        locked = await _lock_claimed_each(conn, dispatcher_id, jobs)
        holding = await held(conn, pubkey) if account is not None else 0
        available = 0 if account is None else int(account["balance"]) - holding
        today = None if account is None else room(account, holding)
        moves: list[Move] = []
        unpaid: list[tuple[ClaimedJob, int, int, str | None]] = []  # paused below, in webhook id order
        for job in jobs:
            row = locked.get(job.id)
            if row is None:
                charges[job.id] = Charge.LOST
                continue
            price = int(row["price"])
            if price <= 0 or row["charged"] > 0:
                charges[job.id] = Charge.PAID
            elif account is None or account["status"] == "suspended" or available < price:
                suspended = account is not None and account["status"] == "suspended"
                reason = webhooks.SUSPENDED_REASON % job.webhook_id if suspended else None
                unpaid.append((job, price, available, reason))
                charges[job.id] = Charge.UNPAID
            elif today is not None and today < price:
                await _wait_for_tomorrow(conn, job)
                charges[job.id] = Charge.UNPAID
            else:
                available -= price
                today = None if today is None else today - price
                moves.append(
                    Move("debit", -price, f"webhook delivery {job.id} ({job.event_type})", f"delivery:{job.id}")
                )
                charges[job.id] = Charge.CHARGED
        # Subscriptions are locked in id order, as the outcomes' streaks lock them (_streaks): two
        # transactions pausing or streaking several never wait for each other in a circle.
        for job, price, available_then, reason in sorted(unpaid, key=lambda u: (u[0].webhook_id, u[0].id)):
            await _pause_unpaid(conn, job, price, available_then, reason)
        if not moves:
            return charges
        assert account is not None
        debited = await debit(conn, account, moves)
        await conn.execute(
            "UPDATE delivery_jobs j SET charged = u.price FROM unnest($1::bigint[], $2::bigint[]) AS u(id, price) "
            "WHERE j.id = u.id",
            [job.id for job in jobs if charges[job.id] is Charge.CHARGED],
            [-move.amount for move in moves],
        )
    if debited.crossed_low:
        await fire(events, LOW_BALANCE, pubkey, low_balance(debited.balance))
    return charges


async def _wait_for_tomorrow(conn: asyncpg.Connection, job: ClaimedJob) -> None:
    """The account's daily spend cap leaves less than the job's price today (docs/api.md, Spend cap): the
    job waits, ``pending`` with this attempt uncounted, until the UTC day turns; its webhook is not paused."""
    await conn.execute(
        """UPDATE delivery_jobs SET status = 'pending', attempts = attempts - 1, locked_by = NULL,
                  locked_until = NULL, last_error = $2,
                  next_attempt_at = (date_trunc('day', now() AT TIME ZONE 'UTC') + interval '1 day') AT TIME ZONE 'UTC'
           WHERE id = $1""",
        job.id,
        SPEND_CAP_MESSAGE,
    )


async def _free(pool: asyncpg.Pool, dispatcher_id: str, job: ClaimedJob) -> Charge:
    """A free job goes out unless its account is suspended: then, as an unpaid one, it waits (pending)
    with its subscription paused until the owner resumes it (docs/api.md, ACCOUNT_SUSPENDED)."""
    status = await pool.fetchval("SELECT status FROM accounts WHERE pubkey = $1", job.pubkey)
    if status != "suspended":
        return Charge.PAID
    async with pool.acquire() as conn, conn.transaction():
        if await _lock_claimed(conn, dispatcher_id, job) is None:
            return Charge.LOST
        await _pause_unpaid(conn, job, 0, 0, webhooks.SUSPENDED_REASON % job.webhook_id)
    return Charge.UNPAID


async def _lock_claimed(conn: asyncpg.Connection, dispatcher_id: str, job: ClaimedJob) -> asyncpg.Record | None:
    """The job's price and charge, locked, while this attempt still holds its claim; None once it lost it."""
    return await conn.fetchrow(
        """SELECT price, charged FROM delivery_jobs
           WHERE id = $1 AND status = 'delivering' AND locked_by = $2 AND attempts = $3 FOR UPDATE""",
        job.id,
        dispatcher_id,
        job.attempts,
    )


async def _lock_claimed_each(
    conn: asyncpg.Connection, dispatcher_id: str, jobs: Sequence[ClaimedJob]
) -> dict[int, asyncpg.Record]:
    """:func:`_lock_claimed` of several jobs in one statement, locked in id order; by job id."""
    rows = await conn.fetch(
        """SELECT j.id, j.price, j.charged FROM delivery_jobs j
           JOIN unnest($1::bigint[], $3::int[]) AS u(id, attempts) ON j.id = u.id
           WHERE j.status = 'delivering' AND j.locked_by = $2 AND j.attempts = u.attempts
           ORDER BY j.id FOR UPDATE OF j""",
        [job.id for job in jobs],
        dispatcher_id,
        [job.attempts for job in jobs],
    )
    return {int(row["id"]): row for row in rows}


async def _pause_unpaid(
    conn: asyncpg.Connection, job: ClaimedJob, price: int, available: int, reason: str | None = None
) -> None:
    reason = reason or f"insufficient credits: a delivery costs {price}, {max(available, 0)} available"
    await webhooks.pause(conn, job.webhook_id, reason)
    await conn.execute(
        """UPDATE delivery_jobs SET status = 'pending', attempts = attempts - 1, locked_by = NULL,
                  locked_until = NULL, last_error = $2
           WHERE id = $1""",
        job.id,
        reason,
    )


def _claimed(row: asyncpg.Record) -> ClaimedJob:
    # By position (claim_delivery_jobs' columns, migration 0029): read for every job claimed.
    job_id, _, webhook_id, pubkey, url, secret, event_type, payload, created_at, attempts, price, charged, suspended = (
        row
    )
    return ClaimedJob(
        job_id, webhook_id, pubkey, url, secret, event_type, payload, created_at, attempts, price, charged, suspended
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


@postgres_call(WHAT)
async def unpark(pool: asyncpg.Pool, batch: int = 5_000) -> int:
    """Make due again up to ``batch`` parked jobs (``next_attempt_at`` infinity) whose subscription is
    active: one a claim parked as its subscription was being resumed; how many."""
    tag = await pool.execute(
        """UPDATE delivery_jobs SET next_attempt_at = now() WHERE id IN (
               SELECT j.id FROM delivery_jobs j JOIN webhooks w ON w.id = j.webhook_id
                WHERE j.status = 'pending' AND j.next_attempt_at = 'infinity' AND w.status = 'active'
                LIMIT $1 FOR UPDATE OF j SKIP LOCKED)""",
        batch,
    )
    return int(tag.split()[-1])
