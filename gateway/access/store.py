"""The access rules' table (migrations 0021, 0023 and 0031) and the message that tells every process they changed.

A change is published on the ``REVOKED_KEYS`` channel, the one key rotations and logouts use, after
its transaction commits: each process (replica or gRPC server) that follows the channel drops its
cached rules of the account and re-checks the connections the account holds open
(:mod:`gateway.access.guard`).
"""

from __future__ import annotations

import asyncpg

from gateway.access.rules import NO_RULES, AccessRules
from gateway.credits.recall_messages import SPEND_CAP, Want, encode
from gateway.storage.channels import Channel
from gateway.storage.errors import postgres_call

WHAT = "the access rules"
#: A rules change's message on ``REVOKED_KEYS``: this prefix, then the account's public key.
CHANGED_PREFIX = "access:"


def changed_message(pubkey: str) -> str:
    return CHANGED_PREFIX + pubkey


@postgres_call(WHAT)
async def load(pool: asyncpg.Pool, pubkey: str) -> AccessRules:
    """The account's rules (no row: none)."""
    row = await pool.fetchrow(
        "SELECT origins, addresses, methods, rate_limit_rps, webhooks FROM access_rules WHERE pubkey = $1", pubkey
    )
    if row is None:
        return NO_RULES
    return AccessRules(
        tuple(row["origins"]),
        tuple(row["addresses"]),
        tuple(row["methods"]),
        row["rate_limit_rps"],
        tuple(row["webhooks"]),
    )


@postgres_call(WHAT)
async def save(pool: asyncpg.Pool, pubkey: str, rules: AccessRules) -> bool:
    """Write the account's rules; False when there is no account."""
    async with pool.acquire() as conn, conn.transaction():
        if await conn.fetchval("SELECT 1 FROM accounts WHERE pubkey = $1 FOR UPDATE", pubkey) is None:
            return False
        await conn.execute(
            """INSERT INTO access_rules (pubkey, origins, addresses, methods, rate_limit_rps, webhooks)
               VALUES ($1, $2, $3, $4, $5, $6)
               ON CONFLICT (pubkey) DO UPDATE
               SET origins = $2, addresses = $3, methods = $4, rate_limit_rps = $5, webhooks = $6,
                   updated_at = now()""",
            pubkey,
            list(rules.origins),
            list(rules.addresses),
            list(rules.methods),
            rules.rate,
            list(rules.webhooks),
        )
    return True


async def announce(channel: Channel, pubkey: str) -> None:
    """Tell every process the account's rules changed; raises ``StoreUnavailable`` when Redis cannot."""
    await channel.publish([changed_message(pubkey)])


@postgres_call(WHAT)
async def spend_cap(pool: asyncpg.Pool, pubkey: str) -> tuple[int | None, int] | None:
    """The account's daily spend cap and what today's debits took (UTC); None when there is no account."""
    row = await pool.fetchrow(
        """SELECT daily_spend_cap,
                  CASE WHEN spend_day = (now() AT TIME ZONE 'UTC')::date THEN spent_on_day ELSE 0 END AS spent
           FROM accounts WHERE pubkey = $1""",
        pubkey,
    )
    return None if row is None else (row["daily_spend_cap"], int(row["spent"]))


@postgres_call(WHAT)
async def set_spend_cap(pool: asyncpg.Pool, pubkey: str, cap: int | None) -> tuple[int | None, int] | None:
    """Set the account's daily spend cap (None: none), under the account lock every credit writer takes;
    the cap and today's spending after, or None when there is no account."""
    row = await pool.fetchrow(
        """UPDATE accounts SET daily_spend_cap = $2 WHERE pubkey = $1
           RETURNING daily_spend_cap,
                     CASE WHEN spend_day = (now() AT TIME ZONE 'UTC')::date THEN spent_on_day ELSE 0 END AS spent""",
        pubkey,
        cap,
    )
    return None if row is None else (row["daily_spend_cap"], int(row["spent"]))


async def recall_leases(channel: Channel, pubkey: str) -> None:
    """Ask every process to give back its credit leases of the account (:mod:`gateway.credits.recall`),
    so that the next lease is taken under the new cap."""
    await channel.publish([encode(Want(SPEND_CAP, pubkey))])
