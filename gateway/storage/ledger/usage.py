"""The per-call usage log's retention: ``usage_history`` rows are written by the settle
(:mod:`gateway.storage.ledger.leases`, :mod:`gateway.storage.sends`) and deleted here once past it."""

from __future__ import annotations

import asyncpg

from gateway.storage.errors import postgres_call


@postgres_call("the credit ledger")
async def purge_usage(pool: asyncpg.Pool, older_than_days: float, batch: int = 5_000) -> int:
    """Delete up to ``batch`` usage rows of calls made more than ``older_than_days`` ago; how many went.

    The ledger's entries and balances are not touched: a usage row only records a call already charged."""
    tag = await pool.execute(
        """DELETE FROM usage_history WHERE id IN (
               SELECT id FROM usage_history WHERE created_at < now() - $1::float8 * interval '1 day' LIMIT $2)""",
        float(older_than_days),
        batch,
    )
    return int(tag.split()[-1])
