"""The jobs the webhooks' own sources write, and their resume positions.

The transaction watches and the signal follower (:mod:`gateway.webhooks.sources`) write their jobs
together with their position (``webhook_watch_cursors``, ``webhook_source_positions``: migration 0008)
in one transaction. Each of their jobs carries a dedupe key (the transaction's signature, the signal's
stream id), unique per subscription, so a source that sees the same thing twice (the stream and the
poll, a restart repeating a pass) adds one job. (The lifecycle events' jobs are written by their
causes, below this feature: :mod:`gateway.storage.webhook_events`.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from gateway.storage.errors import postgres_call
from gateway.storage.webhook_events import ON_CONFLICT, json_text
from gateway.webhooks.events import BLOCK_TIME_SLACK_S, TRANSACTION_EVENT, signal_event_type

WHAT = "the webhook store"

#: The address a watch subscription follows: its filter value; a ``my_account`` one's owner by default.
WATCHED = "CASE WHEN w.filter_type = 'my_account' THEN COALESCE(w.filter_value, w.pubkey) ELSE w.filter_value END"


# ------------------------------------------------------------------------------- transaction watches


@dataclass(frozen=True, slots=True)
class WatchTarget:
    """An address some active watch subscription follows; ``since`` the oldest of them was created."""

    address: str
    since: datetime


@postgres_call(WHAT)
async def watch_targets(pool: asyncpg.Pool, limit: int) -> list[WatchTarget]:
    """The addresses of the active ``account``, ``program`` and ``my_account`` subscriptions, at most
    ``limit`` of them (the longest-watched first)."""
    rows = await pool.fetch(
        f"""SELECT {WATCHED} AS address, min(w.created_at) AS since FROM webhooks w
            WHERE w.status = 'active' AND w.filter_type IN ('account', 'program', 'my_account')
            GROUP BY 1 HAVING {WATCHED} IS NOT NULL
            ORDER BY since, address LIMIT $1""",
        limit,
    )
    return [WatchTarget(row["address"], row["since"]) for row in rows]


@postgres_call(WHAT)
async def watch_cursor(pool: asyncpg.Pool, address: str) -> str | None:
    """The newest signature of ``address`` whose jobs are written, or None before the first."""
    value = await pool.fetchval("SELECT last_signature FROM webhook_watch_cursors WHERE address = $1", address)
    return value if isinstance(value, str) else None


@postgres_call(WHAT)
async def record_transactions(
    pool: asyncpg.Pool,
    address: str,
    payloads: Sequence[Mapping[str, Any]],
    cursor: str,
    cursor_slot: int | None,
    price: int = 0,
) -> int:
    """Jobs for ``payloads`` (oldest first, successful transactions of ``address``), each priced
    ``price`` (the dispatcher charges it), and the cursor moved to ``cursor``, in one transaction; how
    many jobs were added.

    A transaction reaches the active watch subscriptions of ``address`` created before its block time
    (within :data:`BLOCK_TIME_SLACK_S`), so a new subscription never receives older history. The
    cursor never moves back to an older slot (two passes racing)."""
    async with pool.acquire() as conn, conn.transaction():
        added = 0
        if payloads:
            added = await conn.fetchval(
                f"""WITH tx AS (
                        SELECT t.payload, t.payload ->> 'signature' AS signature,
                               (t.payload ->> 'block_time')::bigint AS block_time, t.n
                        FROM unnest($2::jsonb[]) WITH ORDINALITY AS t(payload, n)
                    ), added AS (
                        INSERT INTO delivery_jobs (webhook_id, event_type, payload, dedupe_key, price)
                        SELECT w.id, $3, tx.payload || jsonb_build_object('filter_type', w.filter_type),
                               tx.signature, $5
                        FROM tx JOIN webhooks w
                          ON w.status = 'active' AND w.filter_type IN ('account', 'program', 'my_account')
                         AND {WATCHED} = $1
                         AND (tx.block_time IS NULL
                              OR w.created_at <= to_timestamp(tx.block_time) + $4::float8 * interval '1 second')
                        ORDER BY tx.n, w.id
                        {ON_CONFLICT}
                        RETURNING 1
                    )
                    SELECT count(*) FROM added""",
                address,
                [json_text(p) for p in payloads],
                TRANSACTION_EVENT,
                float(BLOCK_TIME_SLACK_S),
                price,
            )
        await conn.execute(
            """INSERT INTO webhook_watch_cursors (address, last_signature, last_slot) VALUES ($1, $2, $3)
               ON CONFLICT (address) DO UPDATE
               SET last_signature = EXCLUDED.last_signature, last_slot = EXCLUDED.last_slot, updated_at = now()
               WHERE webhook_watch_cursors.last_slot IS NULL OR EXCLUDED.last_slot IS NULL
                  OR EXCLUDED.last_slot >= webhook_watch_cursors.last_slot""",
            address,
            cursor,
            cursor_slot,
        )
    return int(added)


# ------------------------------------------------------------------------------------------- signals


@postgres_call(WHAT)
async def source_position(pool: asyncpg.Pool, source: str) -> str | None:
    """The last stream id of ``source`` whose jobs are written, or None before the first."""
    value = await pool.fetchval("SELECT position FROM webhook_source_positions WHERE source = $1", source)
    return value if isinstance(value, str) else None


@postgres_call(WHAT)
async def save_source_position(pool: asyncpg.Pool, source: str, position: str) -> None:
    await pool.execute(_SAVE_POSITION, source, position)


@postgres_call(WHAT)
async def record_signals(
    pool: asyncpg.Pool, source: str, events: Sequence[tuple[str, Mapping[str, Any]]], price: int
) -> int:
    """One ``signal.<kind>`` job (priced ``price``) per active ``signal`` subscription that selects the
    event's kind (an empty ``signal_events`` selects all), for ``events`` (``(stream id, event)``,
    oldest first), and the position of ``source`` moved to the last id, in one transaction; how many
    jobs were added."""
    if not events:
        return 0
    ids = [id_ for id_, _ in events]
    kinds = [str(event.get("kind")) for _, event in events]
    async with pool.acquire() as conn, conn.transaction():
        added = await conn.fetchval(
            f"""WITH added AS (
                    INSERT INTO delivery_jobs (webhook_id, event_type, payload, dedupe_key, price)
                    SELECT w.id, e.event_type, e.payload, e.id, $5
                    FROM unnest($1::text[], $2::text[], $3::text[], $4::jsonb[]) WITH ORDINALITY
                         AS e(id, kind, event_type, payload, n)
                    JOIN webhooks w
                      ON w.status = 'active' AND w.filter_type = 'signal'
                     AND (cardinality(w.signal_events) = 0 OR e.kind = ANY (w.signal_events))
                    ORDER BY e.n, w.id
                    {ON_CONFLICT}
                    RETURNING 1
                )
                SELECT count(*) FROM added""",
            ids,
            kinds,
            [signal_event_type(kind) for kind in kinds],
            [json_text(event) for _, event in events],
            price,
        )
        await conn.execute(_SAVE_POSITION, source, ids[-1])
    return int(added)


_SAVE_POSITION = """INSERT INTO webhook_source_positions (source, position) VALUES ($1, $2)
    ON CONFLICT (source) DO UPDATE SET position = EXCLUDED.position, updated_at = now()"""
