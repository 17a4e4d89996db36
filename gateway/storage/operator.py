"""What an operator reads and corrects outside the product's paths (the ``gateway account``, ``audit``,
``sends`` and ``status`` commands): one account whole, credits granted or taken with a reason, the
account's status and limit overrides, the conservation audit of every account, pending sends and the
queues' depths.

Every change runs in one transaction under the account's row lock, as every credit writer does
(:func:`gateway.storage.ledger.sql.lock_account`), and writes an ``operator_actions`` row (migration
0014) with the operator's name and reason; a change of credits also writes its ledger entry through the
ledger's primitives (:func:`gateway.storage.ledger.moves.credit` and ``debit``), whose ``ref`` is
``operator:<name>``. Refusals are :class:`OperatorRefusal` with a message for the operator.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg

from gateway.core.credits import LOW_BALANCE_CREDITS, Conservation
from gateway.storage.ledger.audit import check_conservation
from gateway.storage.ledger.moves import Move, credit, debit
from gateway.storage.ledger.sql import held, lock_account
from gateway.storage.stream_limits import COLUMNS as STREAM_COLUMNS
from gateway.storage.stream_limits import StreamOverrides, write_stream_overrides

SUSPENDED = "suspended"
ACTIVE = "active"


class OperatorRefusal(Exception):
    """The change was refused and nothing was written; the message says why."""


@dataclass(frozen=True, slots=True)
class Change:
    """What a change of credits did."""

    pubkey: str
    amount: int  # signed: a debit is negative
    balance: int  # after it
    action_id: int


@dataclass(frozen=True, slots=True)
class AccountView:
    """One account as an operator sees it (every figure read in one snapshot)."""

    pubkey: str
    status: str
    created_at: datetime
    balance: int
    total_consumed: int
    held: int  # by live leases and pending sends
    low_balance_notified: bool
    rate_limit_rps: int | None  # the account's overrides; None: the settings' defaults
    concurrency_limit: int | None
    streams: StreamOverrides = field(default_factory=StreamOverrides)  # of the gRPC stream's limits
    batches: list[dict[str, Any]] = field(default_factory=list)
    leases: list[dict[str, Any]] = field(default_factory=list)
    sends: list[dict[str, Any]] = field(default_factory=list)
    ledger: list[dict[str, Any]] = field(default_factory=list)
    actions: list[dict[str, Any]] = field(default_factory=list)

    @property
    def available(self) -> int:
        return self.balance - self.held


def operator_ref(operator: str) -> str:
    return f"operator:{operator}"


def _check(reason: str, operator: str) -> None:
    if not reason.strip():
        raise OperatorRefusal("a reason is required (--reason)")
    if not operator.strip():
        raise OperatorRefusal("the operator's name is required (--operator, or $USER)")


async def record_action(
    conn: asyncpg.Connection, pubkey: str | None, action: str, detail: dict[str, Any], reason: str, operator: str
) -> int:
    """Append one ``operator_actions`` row (in the caller's transaction); its id."""
    value = await conn.fetchval(
        """INSERT INTO operator_actions (pubkey, action, detail, reason, operator)
           VALUES ($1, $2, $3::jsonb, $4, $5) RETURNING id""",
        pubkey,
        action,
        json.dumps(detail),
        reason,
        operator,
    )
    return int(value)


async def _locked(conn: asyncpg.Connection, pubkey: str) -> asyncpg.Record:
    account = await lock_account(conn, pubkey)
    if account is None:
        raise OperatorRefusal(f"no account {pubkey}")
    return account


async def credit_account(
    pool: asyncpg.Pool, pubkey: str, credits: int, reason: str, operator: str, expires_s: int
) -> Change:
    """Grant ``credits`` new credits in a batch expiring in ``expires_s``: an ``adjustment`` entry."""
    _check(reason, operator)
    if credits <= 0:
        raise OperatorRefusal(f"credits must be a positive integer, not {credits}")
    if expires_s <= 0:
        raise OperatorRefusal("the batch must expire in the future (--expires-days at least 1)")
    async with pool.acquire() as conn, conn.transaction():
        account = await _locked(conn, pubkey)
        balance = await credit(conn, account, credits, expires_s, f"operator credit: {reason}", operator_ref(operator))
        detail = {"credits": credits, "balance_after": balance, "expires_s": expires_s}
        action = await record_action(conn, pubkey, "credit", detail, reason, operator)
    return Change(pubkey, credits, balance, action)


async def debit_account(pool: asyncpg.Pool, pubkey: str, credits: int, reason: str, operator: str) -> Change:
    """Take ``credits`` from what the account can spend (its balance less what leases and pending sends
    hold): a ``debit`` entry; refused beyond that."""
    _check(reason, operator)
    if credits <= 0:
        raise OperatorRefusal(f"credits must be a positive integer, not {credits}")
    async with pool.acquire() as conn, conn.transaction():
        account = await _locked(conn, pubkey)
        holding = await held(conn, pubkey)
        available = int(account["balance"]) - holding
        if credits > available:
            raise OperatorRefusal(
                f"cannot debit {credits} credits: the account has {available} to spend "
                f"(balance {account['balance']}, {holding} held by leases and pending sends)"
            )
        move = Move("debit", -credits, f"operator debit: {reason}", operator_ref(operator))
        debited = await debit(conn, account, [move])
        detail = {"credits": credits, "balance_after": debited.balance}
        action = await record_action(conn, pubkey, "debit", detail, reason, operator)
    return Change(pubkey, -credits, debited.balance, action)


async def set_status(pool: asyncpg.Pool, pubkey: str, status: str, reason: str, operator: str) -> bool:
    """Suspend (``suspended``) or resume (``active``) the account; False when it was so already (nothing
    is written then). The meter sees it at each replica's next lease (docs/api.md, ACCOUNT_SUSPENDED)."""
    _check(reason, operator)
    assert status in (SUSPENDED, ACTIVE), status
    async with pool.acquire() as conn, conn.transaction():
        account = await _locked(conn, pubkey)
        if account["status"] == status:
            return False
        await conn.execute("UPDATE accounts SET status = $2 WHERE pubkey = $1", pubkey, status)
        action = "suspend" if status == SUSPENDED else "resume"
        await record_action(conn, pubkey, action, {"from": account["status"], "to": status}, reason, operator)
    return True


@dataclass(frozen=True, slots=True)
class Overrides:
    """An account's limit overrides (None: the settings' default)."""

    rate_limit_rps: int | None = None
    concurrency_limit: int | None = None
    streams: StreamOverrides = field(default_factory=StreamOverrides)

    def as_dict(self) -> dict[str, int | None]:
        return {"rate_limit_rps": self.rate_limit_rps, "concurrency_limit": self.concurrency_limit} | (
            self.streams.as_dict()
        )


async def set_limits(
    pool: asyncpg.Pool, pubkey: str, overrides: Overrides, reason: str, operator: str
) -> tuple[Overrides, Overrides]:
    """Set the account's overrides of ``rate_limit_rps`` and ``concurrency_limit`` and of the gRPC stream's
    limits (None: back to the settings' default); the overrides before and after."""
    _check(reason, operator)
    for name, value in overrides.as_dict().items():
        if value is not None and value <= 0:
            raise OperatorRefusal(f"{name} must be a positive integer, not {value}")
    async with pool.acquire() as conn, conn.transaction():
        account = await _locked(conn, pubkey)
        streams = await conn.fetchrow(f"SELECT {', '.join(STREAM_COLUMNS)} FROM accounts WHERE pubkey = $1", pubkey)
        before = Overrides(account["rate_limit_rps"], account["concurrency_limit"], StreamOverrides.of(streams))
        await conn.execute(
            "UPDATE accounts SET rate_limit_rps = $2, concurrency_limit = $3 WHERE pubkey = $1",
            pubkey,
            overrides.rate_limit_rps,
            overrides.concurrency_limit,
        )
        await write_stream_overrides(conn, pubkey, overrides.streams)
        detail = {"before": before.as_dict(), "after": overrides.as_dict()}
        await record_action(conn, pubkey, "limits", detail, reason, operator)
    return before, overrides


def _rows(records: list[asyncpg.Record]) -> list[dict[str, Any]]:
    return [dict(r) for r in records]


async def account_view(pool: asyncpg.Pool, pubkey: str, entries: int = 20) -> AccountView | None:
    """The account whole, in one repeatable-read snapshot; None when there is none."""
    async with pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
        row = await conn.fetchrow(
            f"""SELECT pubkey, status, created_at, balance, total_consumed, low_balance_notified,
                      rate_limit_rps, concurrency_limit, {", ".join(STREAM_COLUMNS)}
               FROM accounts WHERE pubkey = $1""",
            pubkey,
        )
        if row is None:
            return None
        batches = await conn.fetch(
            """SELECT id, source, granted, remaining, expires_at, expires_at <= now() AS expired, deposit_signature
               FROM credit_batches WHERE pubkey = $1 AND remaining > 0 ORDER BY expires_at, id""",
            pubkey,
        )
        leases = await conn.fetch(
            """SELECT id, replica_id, granted, used, granted - used AS unsettled, expires_at, created_at
               FROM credit_leases WHERE pubkey = $1 AND NOT released AND expires_at > now() ORDER BY id""",
            pubkey,
        )
        sends = await conn.fetch(
            """SELECT signature, held, created_at, extract(epoch FROM now() - created_at)::float8 AS age_s
               FROM sends WHERE pubkey = $1 AND status = 'pending' ORDER BY created_at""",
            pubkey,
        )
        ledger = await conn.fetch(
            """SELECT id, type, amount, balance_after, description, ref, created_at FROM ledger_entries
               WHERE pubkey = $1 ORDER BY id DESC LIMIT $2""",
            pubkey,
            entries,
        )
        actions = await conn.fetch(
            """SELECT id, action, detail::text AS detail, reason, operator, created_at FROM operator_actions
               WHERE pubkey = $1 ORDER BY id DESC LIMIT $2""",
            pubkey,
            entries,
        )
        holding = await held(conn, pubkey)
    return AccountView(
        pubkey=row["pubkey"],
        status=row["status"],
        created_at=row["created_at"],
        balance=int(row["balance"]),
        total_consumed=int(row["total_consumed"]),
        held=holding,
        low_balance_notified=bool(row["low_balance_notified"]),
        rate_limit_rps=row["rate_limit_rps"],
        concurrency_limit=row["concurrency_limit"],
        streams=StreamOverrides.of(row),
        batches=_rows(batches),
        leases=_rows(leases),
        sends=_rows(sends),
        ledger=_rows(ledger),
        actions=_rows(actions),
    )


async def account_count(pool: asyncpg.Pool) -> int:
    return int(await pool.fetchval("SELECT count(*) FROM accounts"))


async def audit_accounts(pool: asyncpg.Pool, page: int = 500) -> AsyncIterator[tuple[str, Conservation]]:
    """Every account's conservation check (:func:`gateway.storage.ledger.audit.check_conservation`), in
    key order, a page of keys at a time."""
    after = ""
    while True:
        keys = await pool.fetch("SELECT pubkey FROM accounts WHERE pubkey > $1 ORDER BY pubkey LIMIT $2", after, page)
        if not keys:
            return
        async with pool.acquire() as conn:
            for row in keys:
                yield row["pubkey"], await check_conservation(conn, row["pubkey"])
        after = keys[-1]["pubkey"]


async def pending_sends(pool: asyncpg.Pool, limit: int = 200) -> list[dict[str, Any]]:
    """Send holds not settled yet, oldest first, with their age in seconds."""
    rows = await pool.fetch(
        """SELECT signature, pubkey, held, base_fee, hold_slot, retry_count, legs, created_at,
                  extract(epoch FROM now() - created_at)::float8 AS age_s
           FROM sends WHERE status = 'pending' ORDER BY created_at LIMIT $1""",
        limit,
    )
    return _rows(rows)


async def queue_figures(db: asyncpg.Pool | asyncpg.Connection) -> dict[str, Any]:
    """The database's side of ``gateway status``: the webhook queue, the pending send holds, the
    deposit watcher's cursor, the accounts below the low-balance line."""
    row = await db.fetchrow(
        """SELECT
             (SELECT count(*) FROM delivery_jobs WHERE status IN ('pending', 'delivering')) AS webhook_queue,
             (SELECT count(*) FROM delivery_jobs WHERE status = 'dead') AS webhook_dead,
             (SELECT extract(epoch FROM now() - min(created_at))::float8 FROM delivery_jobs
               WHERE status IN ('pending', 'delivering')) AS webhook_oldest_s,
             (SELECT count(*) FROM sends WHERE status = 'pending') AS sends_pending,
             (SELECT COALESCE(sum(held), 0) FROM sends WHERE status = 'pending') AS sends_held,
             (SELECT extract(epoch FROM now() - min(created_at))::float8 FROM sends
               WHERE status = 'pending') AS sends_oldest_s,
             (SELECT max(last_slot) FROM deposit_watch_cursor) AS deposit_cursor_slot,
             (SELECT extract(epoch FROM now() - max(updated_at))::float8 FROM deposit_watch_cursor)
               AS deposit_cursor_age_s,
             (SELECT count(*) FROM accounts) AS accounts,
             (SELECT count(*) FROM accounts WHERE status = 'suspended') AS suspended,
             (SELECT count(*) FROM accounts WHERE balance < $1) AS low_balance""",
        LOW_BALANCE_CREDITS,
    )
    return {k: (int(v) if isinstance(v, int) else v) for k, v in dict(row).items()}


#: The triggers that keep history append-only (migration 0019), by table.
HISTORY_TRIGGERS = {
    "ledger_entries": ("ledger_entries_append_only", "ledger_entries_no_truncate"),
    "operator_actions": ("operator_actions_append_only", "operator_actions_no_truncate"),
}


async def history_guard_gaps(pool: asyncpg.Pool) -> list[str]:
    """Which of :data:`HISTORY_TRIGGERS` are missing or disabled (``ALTER TABLE ... DISABLE TRIGGER``)."""
    rows = await pool.fetch(
        "SELECT c.relname::text AS relname, t.tgname::text AS tgname, t.tgenabled::text AS tgenabled "
        "FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
        "WHERE c.relname = ANY($1::text[]) AND NOT t.tgisinternal",
        list(HISTORY_TRIGGERS),
    )
    enabled = {(r["relname"], r["tgname"]) for r in rows if r["tgenabled"] in ("O", "A")}
    return [
        f"{table}: trigger {name} missing or disabled (UPDATE/DELETE of its rows would not be refused)"
        for table, names in HISTORY_TRIGGERS.items()
        for name in names
        if (table, name) not in enabled
    ]
