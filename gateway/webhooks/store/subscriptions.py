"""Webhook subscriptions in PostgreSQL: their management, and the reads the dispatcher and sources share.

Table ``webhooks`` (migrations 0001, 0007 and 0010), its jobs in ``delivery_jobs``. A subscription is
deleted softly (``status = 'deleted'``, its waiting jobs cancelled, the charges of those never sent to
the receiver refunded). Every function taking the owner's ``pubkey`` sees only that owner's
subscriptions that are not deleted, so a missing id, another account's id and a deleted one look
alike to the caller.

A transaction watch (``account``, ``program``, ``my_account``) of an account whose balance is below the
price of one delivery is paused by :func:`pause_unfunded_watches` (the watcher, before each read of the
watched addresses): paused, it holds no place among the addresses the watcher follows, and it waits for
its owner to resume it, as any paused subscription does.

The signing secret is stored as text, in clear, like any signing secret a server must itself use:
each delivery is signed with it. It leaves this module only through :func:`signing_secret` (for the
dispatcher); :func:`create` and :func:`rotate_secret` take it from the caller, who made it. No
dataclass here carries it, so no record logged or rendered can show it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

import asyncpg

from gateway.storage.errors import postgres_call
from gateway.storage.ledger.sql import lock_account
from gateway.storage.operator import OperatorRefusal, record_action
from gateway.webhooks.events import WATCH_FILTERS
from gateway.webhooks.store.refunds import Refund, refund_deliveries
from gateway.webhooks.store.sources import WATCHED

WHAT = "the webhook store"


class WebhookStatus(StrEnum):
    ACTIVE = "active"
    # Deliveries wait (one could not be paid, too many in a row died, or a watch's account has less than one
    # delivery's price: :func:`pause_unfunded_watches`); resume makes it active.
    PAUSED = "paused"
    DELETED = "deleted"


@dataclass(frozen=True)
class NewWebhook:
    """Validated creation fields (:mod:`gateway.webhooks.management` checks them)."""

    url: str
    filter_type: str
    filter_value: str | None = None
    lifecycle_events: tuple[str, ...] = ()
    signal_events: tuple[str, ...] = ()


class Refusal(StrEnum):
    """Why :func:`create` stored nothing."""

    TOO_MANY = "too_many"  # the account holds ``max_per_account`` subscriptions
    TOO_MANY_ADDRESSES = "too_many_addresses"  # a new address past ``max_watched`` watched ones
    NO_CREDITS = "no_credits"  # the balance is below ``min_balance``
    SUSPENDED = "suspended"  # the account is suspended (docs/api.md, ACCOUNT_SUSPENDED)


@dataclass(frozen=True)
class Refused:
    reason: Refusal
    balance: int  # the account's balance when it was refused


@dataclass(frozen=True)
class Webhook:
    id: int
    pubkey: str
    url: str
    filter_type: str
    filter_value: str | None
    lifecycle_events: tuple[str, ...]
    signal_events: tuple[str, ...]
    status: WebhookStatus
    paused_reason: str | None
    created_at: datetime
    secret_rotated_at: datetime | None


@dataclass(frozen=True)
class DeliveryCounts:
    pending: int  # waiting or being delivered now
    delivered: int
    dead: int  # every attempt failed (replay moves them back to pending)


@dataclass(frozen=True)
class LastDelivery:
    """The newest job that was attempted (or ended): what happened to it."""

    job_id: int
    event_type: str
    status: str  # pending (retrying), delivering, delivered, dead, cancelled
    attempts: int
    http_status: int | None  # the receiver's last answer
    error: str | None
    created_at: datetime
    delivered_at: datetime | None


@dataclass(frozen=True)
class Delivery:
    """One event of a subscription as its owner lists it (:func:`deliveries`)."""

    job_id: int
    event_type: str
    status: str  # pending (waiting or retrying), delivering, delivered, dead, cancelled
    attempts: int
    http_status: int | None  # the receiver's last answer
    excerpt: str | None  # the start of that answer's body, as the dispatcher kept it
    error: str | None
    created_at: datetime
    last_attempt_at: datetime | None  # when the last attempt's outcome was written (None: none yet)
    next_attempt_at: datetime | None  # pending only: when the next attempt is due (None: waits for a resume)
    delivered_at: datetime | None


@dataclass(frozen=True)
class WebhookView:
    """A subscription as its owner lists it."""

    webhook: Webhook
    counts: DeliveryCounts
    last: LastDelivery | None


_COLUMNS = """w.id, w.pubkey, w.url, w.filter_type, w.filter_value, w.lifecycle_events, w.signal_events,
    w.status, w.paused_reason, w.created_at, w.secret_rotated_at"""


@postgres_call(WHAT)
async def create(
    pool: asyncpg.Pool,
    pubkey: str,
    new: NewWebhook,
    secret: str,
    max_per_account: int,
    *,
    max_watched: int | None = None,
    min_balance: int = 0,
) -> Webhook | Refused:
    """Store a subscription of ``pubkey``, or say why not: the account holds ``max_per_account``
    already, the subscription would watch an address beyond the ``max_watched`` distinct ones its
    watches follow (None: no cap), or its balance is below ``min_balance``.

    The checks and the insert run under a per-account advisory lock, so concurrent creations cannot
    pass a cap together.
    """
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", f"webhooks:{pubkey}")
        account = await conn.fetchrow("SELECT balance, status FROM accounts WHERE pubkey = $1", pubkey)
        balance = 0 if account is None else int(account["balance"])
        if account is not None and account["status"] == "suspended":
            return Refused(Refusal.SUSPENDED, balance)
        if balance < min_balance:
            return Refused(Refusal.NO_CREDITS, balance)
        held = await conn.fetchval("SELECT count(*) FROM webhooks WHERE pubkey = $1 AND status <> 'deleted'", pubkey)
        if held >= max_per_account:
            return Refused(Refusal.TOO_MANY, balance)
        if max_watched is not None and new.filter_type in WATCH_FILTERS:
            watched = await conn.fetchrow(
                f"""SELECT count(DISTINCT {WATCHED}) AS n, coalesce(bool_or({WATCHED} = $2), false) AS already
                    FROM webhooks w
                    WHERE w.pubkey = $1 AND w.status <> 'deleted' AND w.filter_type = ANY($3::text[])""",
                pubkey,
                new.filter_value or pubkey,
                list(WATCH_FILTERS),
            )
            if not watched["already"] and watched["n"] >= max_watched:
                return Refused(Refusal.TOO_MANY_ADDRESSES, balance)
        row = await conn.fetchrow(
            f"""INSERT INTO webhooks AS w
                    (pubkey, url, filter_type, filter_value, lifecycle_events, signal_events, secret)
                VALUES ($1, $2, $3, $4, $5, $6, $7)
                RETURNING {_COLUMNS}""",
            pubkey,
            new.url,
            new.filter_type,
            new.filter_value,
            list(new.lifecycle_events),
            list(new.signal_events),
            secret,
        )
    assert row is not None
    return _webhook(row)


@postgres_call(WHAT)
async def listing(pool: asyncpg.Pool, pubkey: str) -> list[WebhookView]:
    """``pubkey``'s subscriptions (not deleted), newest first, with their delivery counts and last delivery."""
    rows = await pool.fetch(
        f"""SELECT {_COLUMNS}, c.pending, c.delivered, c.dead,
                   l.id AS last_id, l.event_type AS last_event_type, l.status AS last_status,
                   l.attempts AS last_attempts, l.last_status AS last_http_status, l.last_error,
                   l.created_at AS last_created_at, l.delivered_at AS last_delivered_at
            FROM webhooks w
            CROSS JOIN LATERAL (
                SELECT count(*) FILTER (WHERE j.status IN ('pending', 'delivering')) AS pending,
                       count(*) FILTER (WHERE j.status = 'delivered') AS delivered,
                       count(*) FILTER (WHERE j.status = 'dead') AS dead
                FROM delivery_jobs j WHERE j.webhook_id = w.id
            ) c
            LEFT JOIN LATERAL (
                SELECT j.id, j.event_type, j.status, j.attempts, j.last_status, j.last_error, j.created_at,
                       j.delivered_at
                FROM delivery_jobs j
                WHERE j.webhook_id = w.id AND (j.attempts > 0 OR j.status IN ('delivered', 'dead'))
                ORDER BY j.id DESC
                LIMIT 1
            ) l ON true
            WHERE w.pubkey = $1 AND w.status <> 'deleted'
            ORDER BY w.id DESC""",
        pubkey,
    )
    return [_view(row) for row in rows]


@postgres_call(WHAT)
async def get(pool: asyncpg.Pool, webhook_id: int, pubkey: str | None = None) -> Webhook | None:
    """The subscription ``webhook_id`` (of ``pubkey`` when given), deleted ones included only without ``pubkey``."""
    if pubkey is None:
        row = await pool.fetchrow(f"SELECT {_COLUMNS} FROM webhooks w WHERE w.id = $1", webhook_id)
    else:
        row = await pool.fetchrow(
            f"SELECT {_COLUMNS} FROM webhooks w WHERE w.id = $1 AND w.pubkey = $2 AND w.status <> 'deleted'",
            webhook_id,
            pubkey,
        )
    return None if row is None else _webhook(row)


@postgres_call(WHAT)
async def signing_secret(pool: asyncpg.Pool, webhook_id: int) -> str | None:
    """The secret deliveries of ``webhook_id`` are signed with now (None once deleted or unknown)."""
    secret: str | None = await pool.fetchval(
        "SELECT secret FROM webhooks WHERE id = $1 AND status <> 'deleted'", webhook_id
    )
    return secret


@postgres_call(WHAT)
async def delete(pool: asyncpg.Pool, pubkey: str, webhook_id: int) -> int | None:
    """Delete ``pubkey``'s subscription and cancel its jobs not yet delivered; how many were cancelled,
    or None when it has no such subscription.

    Jobs being delivered (``delivering``) are cancelled too, so no retry follows; an attempt already
    on its way to the receiver may still arrive. A cancelled waiting job that was charged and never
    sent was never received: its charge is refunded in the same transaction (one ``refund`` entry
    each), under the account lock taken first, as every credit writer does. One being delivered keeps
    its charge for its attempt's outcome to settle (:func:`gateway.webhooks.store.jobs.record`: refunded then
    if that attempt could not connect either), unless its lease has passed (its dispatcher stopped:
    no outcome will come); a receiver that reads it and drops the connection, then deletes the
    webhook, has it charged (docs/api.md, Billing of deliveries). The jobs are locked before the
    subscription, as the dispatcher's writes lock them (jobs, then subscriptions): neither waits for
    the other in turn.
    """
    async with pool.acquire() as conn, conn.transaction():
        account = await lock_account(conn, pubkey)
        if account is None or await _owned(conn, pubkey, webhook_id) is None:
            return None
        jobs = await conn.fetch(
            """SELECT id, charged, sent, status = 'pending' OR locked_until < now() AS idle FROM delivery_jobs
               WHERE webhook_id = $1 AND status IN ('pending', 'delivering') ORDER BY id FOR UPDATE""",
            webhook_id,
        )
        found = await conn.fetchval(
            """UPDATE webhooks SET status = 'deleted', deleted_at = now()
               WHERE id = $1 AND pubkey = $2 AND status <> 'deleted' RETURNING id""",
            webhook_id,
            pubkey,
        )
        if found is None:
            return None
        refunds = [
            Refund(int(j["id"]), int(j["charged"]), f"webhook delivery {j['id']} cancelled: charge returned")
            for j in jobs
            if j["charged"] > 0 and not j["sent"] and j["idle"]
        ]
        await conn.execute(
            """UPDATE delivery_jobs SET status = 'cancelled', locked_by = NULL, locked_until = NULL,
                      charged = CASE WHEN id = ANY($2::bigint[]) THEN 0 ELSE charged END
               WHERE id = ANY($1::bigint[])""",
            [int(j["id"]) for j in jobs],
            [r.job_id for r in refunds],
        )
        await refund_deliveries(conn, account, refunds)
    return len(jobs)


#: A waiting job's ``last_error`` when it is cancelled, its subscription paused too long (docs/api.md).
EXPIRED = "expired: its webhook stayed paused longer than %g days"


@postgres_call(WHAT)
async def expire_paused(pool: asyncpg.Pool, older_than_days: float, batch: int = 5_000) -> int:
    """Cancel up to ``batch`` waiting jobs of subscriptions paused more than ``older_than_days`` ago;
    how many. Nobody will deliver them unless the owner resumes, and every such job is a row the queue
    keeps. A cancelled job that was charged and never sent is refunded in the same transaction, as a
    deletion does (:func:`delete`); the retention of finished jobs deletes them later."""
    hooks = await pool.fetch(
        """SELECT w.id, w.pubkey FROM webhooks w
           WHERE w.status = 'paused' AND w.paused_at < now() - $1::float8 * interval '1 day'
             AND EXISTS (SELECT 1 FROM delivery_jobs j WHERE j.webhook_id = w.id AND j.status = 'pending')
           ORDER BY w.paused_at LIMIT $2""",
        float(older_than_days),
        batch,
    )
    total = 0
    for hook in hooks:
        async with pool.acquire() as conn, conn.transaction():
            account = await lock_account(conn, hook["pubkey"])
            jobs = await conn.fetch(
                """SELECT id, charged, sent FROM delivery_jobs
                   WHERE webhook_id = $1 AND status = 'pending' ORDER BY id LIMIT $2 FOR UPDATE""",
                int(hook["id"]),
                batch - total,
            )
            still = await conn.fetchval(
                """SELECT status = 'paused' AND paused_at < now() - $2::float8 * interval '1 day'
                   FROM webhooks WHERE id = $1""",
                int(hook["id"]),
                float(older_than_days),
            )
            if not jobs or not still or account is None:
                continue
            await conn.execute(
                """UPDATE delivery_jobs SET status = 'cancelled', last_error = $2,
                          charged = CASE WHEN sent THEN charged ELSE 0 END
                   WHERE id = ANY($1::bigint[])""",
                [int(j["id"]) for j in jobs],
                EXPIRED % older_than_days,
            )
            why = "webhook delivery {} expired (its webhook stayed paused): charge returned"
            refunds = [
                Refund(int(j["id"]), int(j["charged"]), why.format(j["id"]))
                for j in jobs
                if j["charged"] > 0 and not j["sent"]
            ]
            if refunds:
                await refund_deliveries(conn, account, refunds)
        total += len(jobs)
        if total >= batch:
            break
    return total


@postgres_call(WHAT)
async def rotate_secret(pool: asyncpg.Pool, pubkey: str, webhook_id: int, secret: str) -> bool:
    """Replace the signing secret of ``pubkey``'s subscription; False when it has no such subscription."""
    found = await pool.fetchval(
        """UPDATE webhooks SET secret = $3, secret_rotated_at = now()
           WHERE id = $1 AND pubkey = $2 AND status <> 'deleted' RETURNING id""",
        webhook_id,
        pubkey,
        secret,
    )
    return found is not None


@postgres_call(WHAT)
async def standing(pool: asyncpg.Pool, pubkey: str) -> tuple[int, bool]:
    """The account's balance and whether it is suspended (0 and False without an account)."""
    row = await pool.fetchrow("SELECT balance, status FROM accounts WHERE pubkey = $1", pubkey)
    return (0, False) if row is None else (int(row["balance"]), row["status"] == "suspended")


#: The window in which an account's replays and resumes are counted (docs/api.md, Limits).
ACTION_WINDOW_S = 60


@postgres_call(WHAT)
async def take_action(pool: asyncpg.Pool, pubkey: str, per_minute: int) -> int | None:
    """Count one replay or resume of ``pubkey``: None when it is within ``per_minute`` in the last
    minute, else the seconds until one of the counted ones leaves the window (nothing counted then).
    Under a per-account advisory lock, so concurrent actions on several replicas cannot pass together."""
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", f"webhook-actions:{pubkey}")
        window = float(ACTION_WINDOW_S)
        await conn.execute(
            "DELETE FROM webhook_actions WHERE pubkey = $1 AND at <= now() - $2::float8 * interval '1 second'",
            pubkey,
            window,
        )
        row = await conn.fetchrow(
            """SELECT count(*) AS n, extract(epoch FROM min(at) + $2::float8 * interval '1 second' - now()) AS wait
               FROM webhook_actions WHERE pubkey = $1""",
            pubkey,
            window,
        )
        if row["n"] >= per_minute:
            return max(1, math.ceil(float(row["wait"])))
        await conn.execute("INSERT INTO webhook_actions (pubkey) VALUES ($1)", pubkey)
    return None


@postgres_call(WHAT)
async def replay_dead(pool: asyncpg.Pool, pubkey: str, webhook_id: int) -> int | None:
    """Move the subscription's dead jobs back to pending, attempts reset and due now; how many, or
    None when ``pubkey`` has no such subscription."""
    async with pool.acquire() as conn, conn.transaction():
        if not await _lock_owned(conn, pubkey, webhook_id):  # a concurrent delete waits, then cancels them
            return None
        done = await conn.execute(
            """UPDATE delivery_jobs
               SET status = 'pending', attempts = 0, next_attempt_at = now(), locked_by = NULL, locked_until = NULL
               WHERE webhook_id = $1 AND status = 'dead'""",
            webhook_id,
        )
    return _affected(done)


@postgres_call(WHAT)
async def dead_jobs(pool: asyncpg.Pool, pubkey: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
    """Dead delivery jobs of subscriptions not deleted (of ``pubkey``'s alone, when given), newest
    first: what an operator may replay (:func:`replay_dead_job`)."""
    rows = await pool.fetch(
        """SELECT j.id, j.webhook_id, w.pubkey, w.url, w.status AS webhook_status, j.event_type, j.attempts,
                  j.last_status, j.last_error, j.price, j.charged, j.answered, j.created_at
           FROM delivery_jobs j JOIN webhooks w ON w.id = j.webhook_id
           WHERE j.status = 'dead' AND w.status <> 'deleted' AND ($1::text IS NULL OR w.pubkey = $1)
           ORDER BY j.id DESC LIMIT $2""",
        pubkey,
        limit,
    )
    return [dict(r) for r in rows]


@postgres_call(WHAT)
async def replay_dead_job(pool: asyncpg.Pool, job_id: int, reason: str, operator: str) -> dict[str, Any]:
    """An operator's replay of one dead job, by the rules of :func:`replay_dead`: back to pending,
    attempts reset, due now (its subscription's status decides when it goes out: a paused one waits
    for its owner's resume). A charge refunded when it died is charged again by the dispatcher before
    the first attempt; a charge kept (some attempt was answered) is not charged twice
    (docs/api.md, Deliveries). Written with an ``operator_actions`` row; raises
    :class:`gateway.storage.operator.OperatorRefusal` when the job is not a dead job of a subscription
    that is not deleted (a replayed job is pending, so a second replay is refused)."""
    async with pool.acquire() as conn, conn.transaction():
        owner = await conn.fetchrow(
            "SELECT w.id, w.pubkey FROM delivery_jobs j JOIN webhooks w ON w.id = j.webhook_id WHERE j.id = $1",
            job_id,
        )
        if owner is None:
            raise OperatorRefusal(f"no delivery job {job_id}")
        status = await _lock_owned(conn, owner["pubkey"], owner["id"])  # a concurrent delete waits
        if status is None:
            raise OperatorRefusal(f"delivery job {job_id}: its webhook {owner['id']} is deleted")
        job = await conn.fetchrow(
            """UPDATE delivery_jobs
               SET status = 'pending', attempts = 0, next_attempt_at = now(), locked_by = NULL, locked_until = NULL
               WHERE id = $1 AND status = 'dead' RETURNING charged, price""",
            job_id,
        )
        if job is None:
            current = await conn.fetchval("SELECT status FROM delivery_jobs WHERE id = $1", job_id)
            raise OperatorRefusal(f"delivery job {job_id} is {current}, not dead: only a dead job is replayed")
        detail = {"job_id": job_id, "webhook_id": int(owner["id"]), "webhook_status": str(status)}
        await record_action(conn, owner["pubkey"], "webhook_replay", detail, reason, operator)
    return {**detail, "pubkey": owner["pubkey"], "charged": int(job["charged"]), "price": int(job["price"])}


@postgres_call(WHAT)
async def resume(pool: asyncpg.Pool, pubkey: str, webhook_id: int) -> bool | None:
    """Make a paused subscription active, its waiting jobs due now and its streak of dead deliveries
    cleared: True if it was paused, False if it was active already, None when ``pubkey`` has no such
    subscription."""
    async with pool.acquire() as conn, conn.transaction():
        status = await _lock_owned(conn, pubkey, webhook_id)
        if status is None:
            return None
        if status != WebhookStatus.PAUSED:
            return False
        await conn.execute(
            "UPDATE webhooks SET status = 'active', paused_reason = NULL, consecutive_dead = 0 WHERE id = $1",
            webhook_id,
        )
        await conn.execute(
            """UPDATE delivery_jobs SET next_attempt_at = least(next_attempt_at, now())
               WHERE webhook_id = $1 AND status = 'pending'""",
            webhook_id,
        )
    return True


@postgres_call(WHAT)
async def pause(db: asyncpg.Pool | asyncpg.Connection, webhook_id: int, reason: str) -> bool:
    """Pause an active subscription (the dispatcher, when a delivery cannot be paid, on the charge's
    own connection); False when it was not active."""
    found = await db.fetchval(
        "UPDATE webhooks SET status = 'paused', paused_reason = $2 WHERE id = $1 AND status = 'active' RETURNING id",
        webhook_id,
        reason,
    )
    return found is not None


@postgres_call(WHAT)
async def deliveries(
    pool: asyncpg.Pool, pubkey: str, webhook_id: int, limit: int, before_id: int | None = None
) -> list[Delivery] | None:
    """``pubkey``'s subscription's events, newest first, at most ``limit``, those older than the job
    ``before_id`` when given (paged by key: the ``delivery_jobs_by_webhook`` index); None when
    ``pubkey`` has no such subscription."""
    async with pool.acquire() as conn:
        if await _owned(conn, pubkey, webhook_id) is None:
            return None
        rows = await conn.fetch(
            """SELECT id, event_type, status, attempts, last_status, response_excerpt, last_error, created_at,
                      last_attempt_at,
                      CASE WHEN status = 'pending' AND next_attempt_at <> 'infinity' THEN next_attempt_at END
                          AS next_attempt_at,
                      delivered_at
               FROM delivery_jobs WHERE webhook_id = $1 AND ($2::bigint IS NULL OR id < $2)
               ORDER BY id DESC LIMIT $3""",
            webhook_id,
            before_id,
            limit,
        )
    return [
        Delivery(
            job_id=int(r["id"]),
            event_type=r["event_type"],
            status=r["status"],
            attempts=int(r["attempts"]),
            http_status=r["last_status"],
            excerpt=r["response_excerpt"],
            error=r["last_error"],
            created_at=r["created_at"],
            last_attempt_at=r["last_attempt_at"],
            next_attempt_at=r["next_attempt_at"],
            delivered_at=r["delivered_at"],
        )
        for r in rows
    ]


#: ``paused_reason`` of a subscription its owner paused (a ``format()`` of its id).
OWNER_PAUSED_REASON = "paused by its owner: POST /webhooks/%s/resume to receive its deliveries again"


@postgres_call(WHAT)
async def pause_owned(pool: asyncpg.Pool, pubkey: str, webhook_id: int) -> bool | None:
    """The owner's pause: True if it was active, False if it was paused already (its reason kept),
    None when ``pubkey`` has no such subscription. Its queued jobs stay queued, charges and all (the
    claim parks them until a resume); nothing is refunded here: a charge comes back only for a job
    never sent that is cancelled (a deletion, or the expiry of one paused too long)."""
    async with pool.acquire() as conn, conn.transaction():
        status = await _lock_owned(conn, pubkey, webhook_id)
        if status is None:
            return None
        if status != WebhookStatus.ACTIVE:
            return False
        return await pause(conn, webhook_id, OWNER_PAUSED_REASON % webhook_id)


#: Why a transaction watch was paused for want of credits (a ``format()`` of the price, the balance and its id).
UNFUNDED_REASON = (
    "insufficient credits: a transaction delivery costs %s and the balance is %s, so its address is not watched: "
    "deposit, then POST /webhooks/%s/resume"
)
SUSPENDED_REASON = (
    "the account is suspended, so its address is not watched: POST /webhooks/%s/resume once it is active again"
)


@postgres_call(WHAT)
async def pause_unfunded_watches(pool: asyncpg.Pool, price: int) -> list[int]:
    """Pause the active transaction watches (``account``, ``program``, ``my_account``) of accounts whose
    balance is below ``price`` (one delivery), with :data:`UNFUNDED_REASON`, and of suspended accounts,
    with :data:`SUSPENDED_REASON` (they can pay for nothing either); their ids.

    A watch on a quiet address makes no delivery whose charge could fail, so without this an account
    that spent its credits would keep its addresses among those the watcher follows for good. Paused,
    it is no longer a watch target (:func:`gateway.webhooks.store.sources.watch_targets` reads active
    subscriptions only) and receives no job; its owner resumes it after a deposit. The balance is the
    account's (credits held by leases and pending sends included: they are still the account's), read
    without the account lock: a deposit committed during the statement may come too late to spare a
    watch, which the owner then resumes. Only subscription rows are locked, in id order, as
    :mod:`gateway.webhooks.store.jobs` locks them, so no writer here waits on it in a cycle.
    No watch is paused for its balance when deliveries are free (``price`` 0).
    """
    rows = await pool.fetch(
        """WITH unpaying AS (
               SELECT w.id, a.balance, a.status = 'suspended' AS suspended
               FROM webhooks w JOIN accounts a ON a.pubkey = w.pubkey
               WHERE w.status = 'active' AND w.filter_type = ANY($2::text[])
                 AND (a.status = 'suspended' OR a.balance < $1::bigint)
               ORDER BY w.id
               FOR UPDATE OF w
           )
           UPDATE webhooks w SET status = 'paused', paused_reason = CASE
               WHEN u.suspended THEN format($4::text, w.id)
               ELSE format($3::text, $1::bigint, u.balance, w.id) END
           FROM unpaying u
           WHERE w.id = u.id
           RETURNING w.id""",
        price,
        list(WATCH_FILTERS),
        UNFUNDED_REASON,
        SUSPENDED_REASON,
    )
    return sorted(int(row["id"]) for row in rows)


async def _owned(conn: asyncpg.Connection, pubkey: str, webhook_id: int) -> WebhookStatus | None:
    status = await conn.fetchval(
        "SELECT status FROM webhooks WHERE id = $1 AND pubkey = $2 AND status <> 'deleted'", webhook_id, pubkey
    )
    return None if status is None else WebhookStatus(status)


async def _lock_owned(conn: asyncpg.Connection, pubkey: str, webhook_id: int) -> WebhookStatus | None:
    status = await conn.fetchval(
        "SELECT status FROM webhooks WHERE id = $1 AND pubkey = $2 AND status <> 'deleted' FOR UPDATE",
        webhook_id,
        pubkey,
    )
    return None if status is None else WebhookStatus(status)


def _affected(command_tag: str) -> int:
    """Rows an UPDATE touched, from its command tag (``UPDATE 3``)."""
    return int(command_tag.rsplit(" ", 1)[-1])


def _strings(values: Sequence[str] | None) -> tuple[str, ...]:
    return tuple(values or ())


def _webhook(row: asyncpg.Record) -> Webhook:
    return Webhook(
        id=row["id"],
        pubkey=row["pubkey"],
        url=row["url"],
        filter_type=row["filter_type"],
        filter_value=row["filter_value"],
        lifecycle_events=_strings(row["lifecycle_events"]),
        signal_events=_strings(row["signal_events"]),
        status=WebhookStatus(row["status"]),
        paused_reason=row["paused_reason"],
        created_at=row["created_at"],
        secret_rotated_at=row["secret_rotated_at"],
    )


def _view(row: asyncpg.Record) -> WebhookView:
    counts = DeliveryCounts(pending=row["pending"], delivered=row["delivered"], dead=row["dead"])
    last = None
    if row["last_id"] is not None:
        last = LastDelivery(
            job_id=row["last_id"],
            event_type=row["last_event_type"],
            status=row["last_status"],
            attempts=row["last_attempts"],
            http_status=row["last_http_status"],
            error=row["last_error"],
            created_at=row["last_created_at"],
            delivered_at=row["last_delivered_at"],
        )
    return WebhookView(_webhook(row), counts, last)
