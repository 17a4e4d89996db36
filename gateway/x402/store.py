"""x402 settlements in PostgreSQL: a signature is settled once (table ``x402_settlements``, migration 0009).

:func:`claim` writes the row before anything is broadcast; its primary key on the signature decides,
across replicas, which request may send the transaction. Only a settlement the node refused at
preflight (nothing was sent) can be claimed again. :func:`finish` records the outcome.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import asyncpg

from gateway.storage.errors import postgres_call

WHAT = "the settlement record"


class SettlementStatus(StrEnum):
    PENDING = "pending"  # claimed; being broadcast, or its outcome was lost
    SUBMITTED = "submitted"  # the node accepted it; not seen confirmed within the wait
    CONFIRMED = "confirmed"  # landed and succeeded
    FAILED = "failed"  # landed and failed: the fee was paid, nothing moved
    REJECTED = "rejected"  # the node refused it before sending (preflight): may be settled again


@dataclass(frozen=True, slots=True)
class Claim:
    """Whether this request may broadcast; if not, the status the earlier settlement has."""

    claimed: bool
    status: SettlementStatus | None = None


@postgres_call(WHAT)
async def claim(
    pool: asyncpg.Pool,
    signature: str,
    *,
    sponsored: bool,
    fee_payer: str,
    authorities: Sequence[str],
    amount_base_units: int,
    client: str | None,
) -> Claim:
    """Record the settlement of ``signature`` as pending, unless it was settled before (a replay)."""
    claimed = await pool.fetchval(
        """INSERT INTO x402_settlements (signature, sponsored, fee_payer, authorities, amount_base_units, client)
           VALUES ($1, $2, $3, $4, $5, $6)
           ON CONFLICT (signature) DO UPDATE
               SET status = 'pending', error = NULL, client = EXCLUDED.client,
                   attempts = x402_settlements.attempts + 1, updated_at = now()
               WHERE x402_settlements.status = 'rejected'
           RETURNING true""",
        signature,
        sponsored,
        fee_payer,
        list(authorities),
        amount_base_units,
        client,
    )
    if claimed:
        return Claim(True)
    return Claim(False, await status(pool, signature))


@postgres_call(WHAT)
async def finish(pool: asyncpg.Pool, signature: str, outcome: SettlementStatus, error: str | None = None) -> None:
    await pool.execute(
        "UPDATE x402_settlements SET status = $2, error = $3, updated_at = now() WHERE signature = $1",
        signature,
        outcome.value,
        error,
    )


@postgres_call(WHAT)
async def status(pool: asyncpg.Pool, signature: str) -> SettlementStatus | None:
    found = await pool.fetchval("SELECT status FROM x402_settlements WHERE signature = $1", signature)
    return SettlementStatus(found) if found is not None else None
