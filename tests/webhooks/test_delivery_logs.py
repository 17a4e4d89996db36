"""What an operator sees of failed deliveries: a warning with the webhook, the delivery, the attempt and
the reason, and never the subscription's secret; the first of each outcome at once, then one per 10 s
with how many were left out (gateway/base/log_throttle.py), however many a tenant's receivers fail."""

from __future__ import annotations

import logging

import asyncpg
import pytest

from gateway.base.log_throttle import LogThrottle
from gateway.webhooks import dispatcher
from gateway.webhooks.dispatcher import fixed_delays
from tests.webhooks.support import Answer, Receiver, dispatching, enqueue, eventually, settled, subscribe


async def test_each_failed_attempt_is_logged_without_the_secret(
    pool: asyncpg.Pool, receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    hook = await subscribe(pool, receiver.url)
    job_id = await enqueue(pool, hook)
    receiver.script[f"evt_{hook.id}_{job_id}"] = [Answer(503, "down"), Answer(404, "gone")]
    with caplog.at_level(logging.WARNING, logger="gateway.webhooks.dispatcher"):
        async with dispatching(pool, retry=fixed_delays([0.05, 0.05])):
            await eventually(settled(pool, job_id), "the dead job")

    failed = [r.getMessage() for r in caplog.records if f"delivery {job_id} " in r.getMessage()]
    assert failed == [
        f"webhook {hook.id} delivery {job_id} attempt 1 failed (retry): HTTP 503",
        f"webhook {hook.id} delivery {job_id} attempt 2 failed (dead): HTTP 404",
    ], failed
    assert all(r.levelno == logging.WARNING for r in caplog.records if f"delivery {job_id} " in r.getMessage())
    assert not any(hook.secret in r.getMessage() for r in caplog.records)


async def test_a_receiver_failing_every_delivery_is_one_warning_not_one_an_attempt(
    pool: asyncpg.Pool, receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    hook = await subscribe(pool, receiver.url)
    receiver.default = Answer(410, "gone")  # dead at its first attempt
    with caplog.at_level(logging.WARNING, logger="gateway.webhooks.dispatcher"):
        async with dispatching(pool, retry=fixed_delays([])) as running:
            running.failures = LogThrottle(dispatcher.log, every_s=3600)  # none passes within the test
            jobs = [await enqueue(pool, hook) for _ in range(200)]
            await eventually(settled(pool, *jobs), "the dead jobs")
    failed = [r.getMessage() for r in caplog.records if " failed (" in r.getMessage()]
    assert len(failed) == 1 and failed[0].endswith("failed (dead): HTTP 410"), failed
    dead = await pool.fetchval("SELECT count(*) FROM delivery_jobs WHERE id = ANY($1) AND status = 'dead'", jobs)
    assert dead == 200  # every outcome recorded, only its warning left out
