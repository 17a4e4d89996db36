"""Finished webhook jobs past retention are deleted; nothing pending or in delivery ever is."""

from __future__ import annotations

import asyncpg

from gateway.webhooks.retention import JobRetention
from tests.webhooks.support import enqueue, subscribe


async def test_finished_jobs_past_retention_are_deleted_and_nothing_else(pool: asyncpg.Pool) -> None:
    """On the module's own database (conftest's ``pool``), as the delivery tests."""
    hook = await subscribe(pool, "https://hooks.example.com/x")
    jobs: dict[tuple[str, int], int] = {}
    for status in ("pending", "delivering", "delivered", "dead", "cancelled"):
        for age_days in (40, 1):
            job_id = await enqueue(pool, hook)
            await pool.execute(
                "UPDATE delivery_jobs SET status = $2, created_at = now() - $3::int * interval '1 day' WHERE id = $1",
                job_id,
                status,
                age_days,
            )
            jobs[(status, age_days)] = job_id
    retention = JobRetention(pool, retention_days=30)
    assert await retention.purge_once() == 3
    left = {row["id"] for row in await pool.fetch("SELECT id FROM delivery_jobs WHERE webhook_id = $1", hook.id)}
    gone = {key for key, job_id in jobs.items() if job_id not in left}
    assert gone == {("delivered", 40), ("dead", 40), ("cancelled", 40)}
    assert await retention.purge_once() == 0 and retention.purged == 3
