"""The daily spend cap stops paid webhook deliveries, not only calls (docs/api.md, "Spend cap"): a
delivery the cap leaves no room for today is not charged nor sent, and waits for the UTC day's turn
with its webhook left running (real parts as tests/webhooks: the module's own PostgreSQL database,
dispatchers in this process, a real receiver on 127.0.0.1)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import asyncpg

from gateway.credits.errors import SPEND_CAP_MESSAGE
from tests.webhooks.conftest import delivery_dsn, pool, receiver
from tests.webhooks.support import Receiver, account, dispatching, enqueue, eventually, subscribe

__all__ = ["delivery_dsn", "pool", "receiver"]


def split(pool: asyncpg.Pool, ids: list[int], delivered: int, waiting: int) -> Callable[[], Awaitable[bool]]:
    """``delivered`` of the jobs charged and delivered, ``waiting`` not charged and pending until the next
    UTC midnight with the cap's reason (which ones: the dispatchers' order)."""

    async def check() -> bool:
        row = await pool.fetchrow(
            """SELECT count(*) FILTER (WHERE status = 'delivered' AND charged = 1) AS delivered,
                      count(*) FILTER (WHERE status = 'pending' AND charged = 0 AND last_error = $2
                          AND next_attempt_at
                              = (date_trunc('day', now() AT TIME ZONE 'UTC') + interval '1 day') AT TIME ZONE 'UTC'
                      ) AS waiting
               FROM delivery_jobs WHERE id = ANY($1::bigint[])""",
            ids,
            SPEND_CAP_MESSAGE,
        )
        return bool((row["delivered"], row["waiting"]) == (delivered, waiting))

    return check


async def test_paid_deliveries_past_the_cap_wait_for_the_day_to_turn(pool: asyncpg.Pool, receiver: Receiver) -> None:
    owner = await account(pool, 100_000)  # 10,000 credits
    await pool.execute("UPDATE accounts SET daily_spend_cap = 3 WHERE pubkey = $1", owner)
    hook = await subscribe(pool, receiver.url, owner, signal=True)
    jobs = [await enqueue(pool, hook, price=1) for _ in range(5)]
    async with dispatching(pool):
        await eventually(split(pool, jobs, 3, 2), "three deliveries within the cap, two waiting for the day's turn")
    assert len(receiver.received) == 3
    assert await pool.fetchval("SELECT status FROM webhooks WHERE id = $1", hook.id) == "active"  # not paused
    row = await pool.fetchrow("SELECT balance, spent_on_day FROM accounts WHERE pubkey = $1", owner)
    assert (row["balance"], row["spent_on_day"]) == (10_000 - 3, 3)
