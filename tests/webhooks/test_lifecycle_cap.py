"""Lifecycle events are free and some can be caused at will (a key rotated): a subscription whose
receiver does not take them has at most 100 waiting, so the queue cannot be filled through it."""

from __future__ import annotations

import asyncpg

from gateway.core.webhook_events import API_KEY_ROTATED
from gateway.storage.webhook_events import MAX_WAITING_LIFECYCLE, enqueue_lifecycle
from gateway.webhooks.rules import new_secret
from gateway.webhooks.store import subscriptions as webhooks
from tests.webhooks.support import account


async def test_a_subscription_has_at_most_100_lifecycle_events_waiting(pool: asyncpg.Pool) -> None:
    pubkey = await account(pool)
    new = webhooks.NewWebhook("https://hooks.example.com/never", "lifecycle", lifecycle_events=(API_KEY_ROTATED,))
    hook = await webhooks.create(pool, pubkey, new, new_secret(), max_per_account=25)
    assert isinstance(hook, webhooks.Webhook)
    async with pool.acquire() as conn:
        queued = [
            await enqueue_lifecycle(conn, pubkey, API_KEY_ROTATED, {"n": n}) for n in range(MAX_WAITING_LIFECYCLE + 5)
        ]
    assert queued == [1] * MAX_WAITING_LIFECYCLE + [0] * 5
    waiting = await pool.fetchval("SELECT count(*) FROM delivery_jobs WHERE webhook_id = $1", hook.id)
    assert waiting == MAX_WAITING_LIFECYCLE == 100
    await pool.execute(
        """UPDATE delivery_jobs SET status = 'delivered'
           WHERE id = (SELECT min(id) FROM delivery_jobs WHERE webhook_id = $1)""",
        hook.id,
    )
    async with pool.acquire() as conn:
        assert await enqueue_lifecycle(conn, pubkey, API_KEY_ROTATED, {"n": "again"}) == 1  # one went out: room for one
