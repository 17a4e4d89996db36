"""A dispatcher's charges of paid jobs, gathered so that one transaction per account charges many.

Each worker asks for its job's charge just before the attempt; asked one by one, every paid delivery
was a transaction of its own on its account's row lock, and with 64 workers on one account's jobs
those transactions queued on that lock (bench.webhooks --price 1: 267 deliveries/s, PostgreSQL
~950 µs of CPU a delivery; bench/README.md). Here the jobs asked for while a charge is under way wait
for the next one, which takes them all (:func:`gateway.webhooks.store.jobs.charge_each`): nothing is held
back when the dispatcher is idle, and under load a batch is as large as the load.
"""

from __future__ import annotations

import asyncio

from gateway.core.credits import EventHook
from gateway.storage.connections import Pool
from gateway.webhooks.store.jobs import Charge, ClaimedJob, charge_each


class Charges:
    def __init__(self, pool: Pool, dispatcher_id: str, events: EventHook) -> None:
        self.pool = pool
        self.dispatcher_id = dispatcher_id
        self.events = events
        self._asked: list[tuple[ClaimedJob, asyncio.Future[Charge]]] = []
        self._running: asyncio.Task[None] | None = None

    def charge(self, job: ClaimedJob) -> asyncio.Future[Charge]:
        """The job's charge, decided with the others of its account asked for meanwhile; a failure of
        that account's charge (the store unavailable) is the exception of each of its jobs."""
        future: asyncio.Future[Charge] = asyncio.get_running_loop().create_future()
        self._asked.append((job, future))
        if self._running is None:
            self._running = asyncio.create_task(self._run())
        return future

    async def _run(self) -> None:
        batch: list[tuple[ClaimedJob, asyncio.Future[Charge]]] = []
        try:
            while self._asked:
                batch, self._asked = self._asked, []
                accounts: dict[str, list[tuple[ClaimedJob, asyncio.Future[Charge]]]] = {}
                for asked in batch:
                    accounts.setdefault(asked[0].pubkey, []).append(asked)
                for pubkey in sorted(accounts):  # one account's store failure is its own jobs' alone
                    await self._charge(accounts[pubkey])
        finally:
            self._running = None
            for _, future in [*batch, *self._asked]:  # cancelled with requests under way or waiting
                future.cancel()
            self._asked = []

    async def _charge(self, asked: list[tuple[ClaimedJob, asyncio.Future[Charge]]]) -> None:
        try:
            charges = await charge_each(self.pool, self.dispatcher_id, [job for job, _ in asked], self.events)
        except Exception as exc:
            for _, future in asked:
                if not future.done():
                    future.set_exception(exc)
            return
        for job, future in asked:
            if not future.done():  # its worker was cancelled: the charge stays on the job (once)
                future.set_result(charges[job.id])

    async def close(self) -> None:
        """Stop charging; what was asked and not charged yet is cancelled."""
        task = self._running
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
