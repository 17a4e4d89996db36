"""What an operator sees of failed deliveries: one warning per failed attempt, with the webhook, the
delivery, the attempt and the reason, and never the subscription's secret."""

from __future__ import annotations

import logging

import asyncpg
import pytest

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
