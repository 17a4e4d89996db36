"""Finished webhook jobs past retention are deleted; nothing pending or in delivery ever is."""

from __future__ import annotations

import asyncpg

from gateway.webhooks.retention import JobRetention
from gateway.webhooks.store import subscriptions as webhooks
from gateway.webhooks.store.jobs import ClaimRules, claim
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


async def test_a_paused_webhooks_jobs_are_parked_out_of_the_claim_and_due_again_on_resume(pool: asyncpg.Pool) -> None:
    """A claim steps over the due jobs of a paused webhook once: it parks them (due at infinity), so the
    claims after it do not read them again; the owner's resume makes them due at once."""
    hook = await subscribe(pool, "https://hooks.example.com/paused")
    waiting = [await enqueue(pool, hook) for _ in range(3)]
    assert await webhooks.pause(pool, hook.id, "test")
    assert await claim(pool, "d1", 10, ClaimRules(60.0, 8)) == []
    parked = await pool.fetch(
        "SELECT next_attempt_at = 'infinity' AS parked FROM delivery_jobs WHERE id = ANY($1)", waiting
    )
    assert [r["parked"] for r in parked] == [True, True, True]
    assert await webhooks.resume(pool, hook.pubkey, hook.id) is True
    claimed = await claim(pool, "d1", 10, ClaimRules(60.0, 8))
    assert sorted(j.id for j in claimed) == sorted(waiting)


async def test_the_jobs_of_a_webhook_paused_past_retention_are_cancelled(pool: asyncpg.Pool) -> None:
    long_paused = await subscribe(pool, "https://hooks.example.com/long")
    lately_paused = await subscribe(pool, "https://hooks.example.com/lately")
    old = [await enqueue(pool, long_paused) for _ in range(2)]
    recent = [await enqueue(pool, lately_paused) for _ in range(2)]
    for hook in (long_paused, lately_paused):
        assert await webhooks.pause(pool, hook.id, "test")
    paused_at = await pool.fetchval("SELECT paused_at FROM webhooks WHERE id = $1", long_paused.id)
    assert paused_at is not None  # kept by the database whatever pauses it
    await pool.execute("UPDATE webhooks SET paused_at = now() - interval '8 days' WHERE id = $1", long_paused.id)

    retention = JobRetention(pool, retention_days=30, paused_days=7)
    await retention.purge_once()
    rows = await pool.fetch(
        "SELECT id, status, last_error FROM delivery_jobs WHERE id = ANY($1) ORDER BY id", old + recent
    )
    states = {r["id"]: (r["status"], r["last_error"]) for r in rows}
    assert [states[i][0] for i in old] == ["cancelled", "cancelled"]
    assert all("stayed paused longer than 7 days" in (states[i][1] or "") for i in old)
    assert [states[i][0] for i in recent] == ["pending", "pending"]
    assert retention.expired == 2
    assert await webhooks.resume(pool, lately_paused.pubkey, lately_paused.id) is True
    assert await pool.fetchval("SELECT paused_at FROM webhooks WHERE id = $1", lately_paused.id) is None
