"""A replica's stop goes on past a step that fails or never ends, and names where that one was stuck;
its tasks are stopped by cancelling them and waiting for their end."""

from __future__ import annotations

import asyncio
import logging

import pytest

from gateway.base.stopping import cancel_and_wait, stop_in_steps


async def test_a_step_that_fails_or_hangs_does_not_keep_the_later_ones_from_running(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ran: list[str] = []
    never = asyncio.Event()
    cancelled = asyncio.Event()

    async def hangs_in_a_close() -> None:
        try:
            await never.wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def fails() -> None:
        raise ConnectionResetError("the node went away")

    async def settles() -> None:
        ran.append("meter")

    steps = [("node pubsub", hangs_in_a_close), ("racers", fails), ("meter", settles)]
    with caplog.at_level(logging.ERROR, logger="gateway.base.stopping"):
        troubled = await stop_in_steps(steps, within_s=0.2)

    assert troubled == ["node pubsub", "racers"]
    assert ran == ["meter"]  # the money step ran after both
    assert cancelled.is_set()  # the stuck step was cancelled, not left running
    overrun = next(r.getMessage() for r in caplog.records if "node pubsub" in r.getMessage())
    assert "hangs_in_a_close" in overrun and "in wait" in overrun  # where it was stuck: its await chain
    assert any(r.exc_info and isinstance(r.exc_info[1], ConnectionResetError) for r in caplog.records)


async def test_a_stop_whose_steps_all_end_reports_nothing() -> None:
    ran: list[int] = []

    async def step() -> None:
        await asyncio.sleep(0)
        ran.append(len(ran))

    assert await stop_in_steps([("a", step), ("b", step)], within_s=1.0) == []
    assert ran == [0, 1]


async def test_cancel_and_wait_ends_every_task_and_skips_the_ones_never_started() -> None:
    forever = [asyncio.ensure_future(asyncio.Event().wait()) for _ in range(3)]
    await cancel_and_wait(None, *forever, None)
    assert all(task.cancelled() for task in forever)


async def test_cancel_and_wait_raises_the_error_of_a_task_that_had_failed() -> None:
    async def fails() -> None:
        raise ValueError("a bug in a loop")

    failed = asyncio.ensure_future(fails())
    await asyncio.sleep(0)
    with pytest.raises(ValueError, match="a bug in a loop"):
        await cancel_and_wait(failed)
