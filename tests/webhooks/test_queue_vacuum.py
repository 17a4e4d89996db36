"""The delivery queue is vacuumed within seconds of 10,000 dead row versions, whatever its size
(migration 0017 and the embedded server's 5 s ``autovacuum_naptime``).

Each delivery leaves two dead versions of its job, and a claim reads the due index in order, stepping
over the dead entries of earlier deliveries until a vacuum removes them (bench/README.md, Webhooks).
Here the queue holds 100,000 finished jobs, so PostgreSQL's default policy would wait for 20,050 dead
versions; 12,000 must be enough.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import asyncpg
import pytest

from tests.databases import drop_database, fresh_database
from tests.webhooks.support import subscribe

FINISHED = 100_000
DEAD = 12_000
WAIT_S = 60.0


@pytest.fixture
async def queue(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    dsn = await fresh_database(database_url, "vacuum")
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=2)
    try:
        yield pool
    finally:
        await pool.close()
        await drop_database(dsn)


async def autovacuums(pool: asyncpg.Pool) -> int:
    count: int = await pool.fetchval("SELECT autovacuum_count FROM pg_stat_user_tables WHERE relname = 'delivery_jobs'")
    return count


async def test_ten_thousand_dead_jobs_are_vacuumed_soon_in_a_large_queue(queue: asyncpg.Pool) -> None:
    hook = await subscribe(queue, "http://127.0.0.1:9/hook")
    await queue.execute(
        """INSERT INTO delivery_jobs (webhook_id, event_type, payload, status, attempts, delivered_at)
           SELECT $1, 'deposit.credited', '{}'::jsonb, 'delivered', 1, now() FROM generate_series(1, $2)""",
        hook.id,
        FINISHED,
    )
    await queue.execute("VACUUM (ANALYZE) delivery_jobs")  # the inserts' own vacuum, done now
    before = await autovacuums(queue)
    await queue.execute(
        "UPDATE delivery_jobs SET last_status = 200 WHERE id IN (SELECT id FROM delivery_jobs ORDER BY id LIMIT $1)",
        DEAD,
    )
    deadline = time.monotonic() + WAIT_S
    while await autovacuums(queue) == before:
        assert time.monotonic() < deadline, f"{DEAD:,} dead jobs of {FINISHED:,} not vacuumed in {WAIT_S:g} s"
        await asyncio.sleep(0.5)
    dead: int = await queue.fetchval("SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'delivery_jobs'")
    assert dead < DEAD
