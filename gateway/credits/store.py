"""Credits' own tables: crediting a USDC deposit at most once, and the deposit watcher's cursor.

Tables: ``deposits`` (one row per credited or ignored transfer; its primary key on the signature is
what makes "credited at most once, whichever path sees it first" hold) and ``deposit_watch_cursor``.
Crediting writes the ledger's tables in the same transaction (:mod:`gateway.storage.ledger`), and
the ``deposit.credited`` webhook jobs (:mod:`gateway.storage.webhook_events`).
"""

from __future__ import annotations

from typing import Any

import asyncpg

from gateway.core.credits import (
    CreditPolicy,
    DepositCredit,
    DepositOutcome,
    EventHook,
    fire,
    no_events,
)
from gateway.core.webhook_events import DEPOSIT_CREDITED, deposit_credited
from gateway.storage.errors import postgres_call
from gateway.storage.ledger.moves import Grant, grant
from gateway.storage.ledger.sql import lock_account
from gateway.storage.webhook_events import enqueue_lifecycle

WHAT = "the credit ledger"


REASON_BELOW_MINIMUM = "below the minimum deposit of {minimum} base units"
REASON_NO_CREDITS = "amount too small to earn a whole credit"


@postgres_call(WHAT)
async def credit_deposit(
    pool: asyncpg.Pool, deposit: DepositCredit, policy: CreditPolicy, events: EventHook = no_events
) -> DepositOutcome:
    """Credit a USDC deposit at most once per signature (the deposits primary key decides)."""
    async with pool.acquire() as conn:
        outcome = await credit_deposit_on(conn, deposit, policy)
    if outcome.credited:
        await fire(events, DEPOSIT_CREDITED, deposit.pubkey, _credited(deposit, outcome))
    return outcome


async def credit_deposit_on(conn: asyncpg.Connection, deposit: DepositCredit, policy: CreditPolicy) -> DepositOutcome:
    """:func:`credit_deposit` on one connection, in its own transaction (the ``deposit.credited``
    webhook jobs included); calls no hook."""
    credits = policy.credits_for(deposit.amount_base_units)
    reason = deposit.refusal or _too_small(deposit, policy, credits)
    async with conn.transaction():
        inserted = await conn.fetchval(
            """INSERT INTO deposits (signature, pubkey, amount_base_units, credits, status, reason, slot)
               VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (signature) DO NOTHING RETURNING true""",
            deposit.signature,
            deposit.pubkey,
            deposit.amount_base_units,
            0 if reason else credits,
            "ignored" if reason else "credited",
            reason,
            deposit.slot,
        )
        if not inserted or reason is not None:
            current = int(await conn.fetchval("SELECT balance FROM accounts WHERE pubkey = $1", deposit.pubkey) or 0)
            if not inserted:
                return DepositOutcome(False, True, 0, current, None)
            return DepositOutcome(False, False, 0, current, reason)
        return await _grant_deposit(conn, deposit, policy, credits)


async def _grant_deposit(
    conn: asyncpg.Connection, deposit: DepositCredit, policy: CreditPolicy, credits: int
) -> DepositOutcome:
    await conn.execute("INSERT INTO accounts (pubkey) VALUES ($1) ON CONFLICT DO NOTHING", deposit.pubkey)
    account = await lock_account(conn, deposit.pubkey)
    assert account is not None
    grants: list[tuple[str, int, str]] = [
        ("deposit", credits, f"USDC deposit of {deposit.amount_base_units} base units")
    ]
    if account["ref_code"] is not None:
        percent = await conn.fetchval(
            """SELECT COALESCE(bonus_percent, $2) FROM referral_codes
               WHERE code = $1 AND (expires_at IS NULL OR expires_at > now())""",
            account["ref_code"],
            policy.referral_bonus_percent,
        )
        bonus = credits * int(percent) // 100 if percent is not None else 0
        if bonus > 0:
            grants.append(("bonus", bonus, f"referral bonus {percent}% ({account['ref_code']})"))
    signature = deposit.signature  # the entries' ref and the batches' deposit
    new = [Grant(kind, amount, description, signature, signature) for kind, amount, description in grants]
    new_balance = await grant(conn, account, new, policy.credit_expiry_seconds)
    added = sum(amount for _, amount, _ in grants)
    outcome = DepositOutcome(True, False, added, new_balance, None, bonus_credits=added - credits)
    await enqueue_lifecycle(conn, deposit.pubkey, DEPOSIT_CREDITED, _credited(deposit, outcome), deposit.signature)
    return outcome


def _credited(deposit: DepositCredit, outcome: DepositOutcome) -> dict[str, Any]:
    """The ``deposit.credited`` event's data (the webhook payload and the hook's)."""
    return deposit_credited(
        deposit.signature,
        deposit.amount_base_units,
        outcome.credits_added,
        outcome.bonus_credits,
        outcome.new_balance,
        deposit.slot,
    )


def _too_small(deposit: DepositCredit, policy: CreditPolicy, credits: int) -> str | None:
    if deposit.amount_base_units < policy.minimum_base_units:
        return REASON_BELOW_MINIMUM.format(minimum=policy.minimum_base_units)
    return REASON_NO_CREDITS if credits <= 0 else None


@postgres_call(WHAT)
async def ignored_reason(pool: asyncpg.Pool, signature: str) -> str | None:
    """Why the deposit recorded under ``signature`` earned nothing, or None (credited, or never seen)."""
    row = await pool.fetchrow("SELECT status, reason FROM deposits WHERE signature = $1", signature)
    if row is not None and row["status"] == "ignored":
        return str(row["reason"] or "ignored")
    return None


@postgres_call(WHAT)
async def watch_cursor(pool: asyncpg.Pool, ata: str) -> str | None:
    """The newest signature the watcher fully processed for token account ``ata``, or None before the first."""
    value = await pool.fetchval("SELECT last_signature FROM deposit_watch_cursor WHERE ata = $1", ata)
    return value if isinstance(value, str) else None


@postgres_call(WHAT)
async def save_watch_cursor(pool: asyncpg.Pool, ata: str, signature: str, slot: int | None) -> None:
    await pool.execute(
        """INSERT INTO deposit_watch_cursor (ata, last_signature, last_slot, updated_at)
           VALUES ($1, $2, $3, now())
           ON CONFLICT (ata) DO UPDATE
           SET last_signature = EXCLUDED.last_signature, last_slot = EXCLUDED.last_slot, updated_at = now()""",
        ata,
        signature,
        slot,
    )
