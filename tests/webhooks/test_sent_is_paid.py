"""A delivery the receiver got is paid (docs/api.md, Webhooks: Billing of deliveries).

The receiver here is a real TCP server on 127.0.0.1 that reads each request whole (headers and body,
signature included) and closes the connection without answering: it got every event, and nothing it
does afterwards (letting the jobs die, deleting or pausing the webhook) gives a charge back. Only a
delivery no attempt of which reached a receiver (connection refused here) is refunded. Dispatchers run
in this process on the module's own database; deletion goes through a gateway's ``DELETE /webhooks``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import asyncpg
import pytest

from gateway.runtime.ports import free_port
from gateway.webhooks.dispatcher import fixed_delays
from gateway.webhooks.store import jobs as delivery_jobs
from gateway.webhooks.store import subscriptions as webhooks
from gateway.webhooks.store.jobs import ClaimRules, Outcome, Result
from tests.support import RunningGateway
from tests.webhooks.conftest import STARTING_CREDITS, WebhookClient
from tests.webhooks.support import (
    Hook,
    account,
    balance,
    conserved,
    dispatching,
    enqueue,
    eventually,
    is_true,
    job,
    ledger,
    settled,
    subscribe,
)

PRICE = 5


class ReadsAndDrops:
    """Reads each HTTP request to the end of its body, records its event id, and closes the connection
    without a byte of answer (after ``hold`` is set, when one is given)."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.hold: asyncio.Event | None = None
        self.reading = 0  # requests read whole and not yet dropped
        self.url = ""

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")[1:]
            headers = {name.lower(): value for name, _, value in (line.partition(": ") for line in lines)}
            await reader.readexactly(int(headers["content-length"]))
            self.events.append(headers["x-webhook-event-id"])
            self.reading += 1
            try:
                if self.hold is not None:
                    await self.hold.wait()
            finally:
                self.reading -= 1
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@pytest.fixture
async def dropper() -> AsyncIterator[ReadsAndDrops]:
    receiver = ReadsAndDrops()
    server = await asyncio.start_server(receiver.handle, "127.0.0.1", 0)
    receiver.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/hook"
    yield receiver
    if receiver.hold is not None:
        receiver.hold.set()
    server.close()
    await server.wait_closed()


def refs(entries: list[tuple[str, int, str | None]], job_id: int) -> list[tuple[str, int]]:
    return [(kind, amount) for kind, amount, ref in entries if ref == f"delivery:{job_id}"]


def nowhere() -> str:
    return f"http://127.0.0.1:{free_port()}/hook"  # nothing listens: every connect is refused


async def test_deliveries_read_and_dropped_until_they_die_stay_charged_once(
    pool: asyncpg.Pool, dropper: ReadsAndDrops
) -> None:
    """Three attempts of each paid delivery, every one read whole and dropped unanswered: dead, and
    charged once (the retries are not charged again), never refunded. A delivery no attempt of which
    could connect is refunded."""
    pubkey = await account(pool, 100_000)  # 10,000 credits
    hook = await subscribe(pool, dropper.url, pubkey, signal=True)
    read = [await enqueue(pool, hook, price=PRICE) for _ in range(3)]
    unreached = await enqueue(pool, await subscribe(pool, nowhere(), pubkey, signal=True), price=PRICE)
    async with dispatching(pool, retry=fixed_delays([0.05, 0.05])):
        await eventually(settled(pool, *read, unreached), "every delivery dead")

    entries = await ledger(pool, pubkey)
    for job_id in read:
        row = await job(pool, job_id)
        assert (row["status"], row["attempts"], row["charged"], row["answered"]) == ("dead", 3, PRICE, False)
        assert refs(entries, job_id) == [("debit", -PRICE)]
        assert dropper.events.count(f"evt_{hook.id}_{job_id}") == 3
    assert refs(entries, unreached) == [("debit", -PRICE), ("refund", PRICE)]
    assert await balance(pool, pubkey) == 10_000 - 3 * PRICE and await conserved(pool, pubkey)


async def test_deleting_a_webhook_whose_deliveries_were_read_refunds_only_what_never_reached_it(
    pool: asyncpg.Pool, dropper: ReadsAndDrops, gateway_here: RunningGateway, http: aiohttp.ClientSession
) -> None:
    """Paid deliveries read and dropped, each waiting an hour for its retry, and paid deliveries to an
    address nothing listens on: deleting both webhooks cancels them all; only the unreached ones'
    charges come back."""
    owner = await WebhookClient.new(http, gateway_here)
    reading = await owner.created(url=dropper.url, filter_type="signal")
    refusing = await owner.created(url=nowhere(), filter_type="signal")
    read = [await enqueue(pool, Hook(reading["id"], owner.pubkey, ""), price=1) for _ in range(3)]
    unreached = [await enqueue(pool, Hook(refusing["id"], owner.pubkey, ""), price=1) for _ in range(2)]
    every = [*read, *unreached]

    async def waiting_charged() -> bool:
        rows = await pool.fetch("SELECT status, attempts, charged FROM delivery_jobs WHERE id = ANY($1)", every)
        return {(r["status"], r["attempts"], r["charged"]) for r in rows} == {("pending", 1, 1)}

    async with dispatching(pool, retry=fixed_delays([3600])):
        await eventually(waiting_charged, "every delivery charged, attempted once, its retry an hour away")
    assert len(dropper.events) == 3

    for created, cancelled in ((reading, 3), (refusing, 2)):
        gone = await owner.delete(created["id"])
        assert gone.status == 200 and gone.json["cancelled_jobs"] == cancelled
    entries = await ledger(pool, owner.pubkey)
    for job_id in read:
        assert refs(entries, job_id) == [("debit", -1)]
        assert ((await job(pool, job_id))["status"], (await job(pool, job_id))["charged"]) == ("cancelled", 1)
    for job_id in unreached:
        assert refs(entries, job_id) == [("debit", -1), ("refund", 1)]
    assert await balance(pool, owner.pubkey) == STARTING_CREDITS - 3 and await conserved(pool, owner.pubkey)


async def test_a_delivery_being_read_when_its_webhook_is_deleted_stays_charged(
    pool: asyncpg.Pool, dropper: ReadsAndDrops, gateway_here: RunningGateway, http: aiohttp.ClientSession
) -> None:
    """The receiver has read the delivery and holds the connection; the webhook is deleted; then the
    receiver drops the connection unanswered. The event reached it: no refund, at the cancel or after."""
    owner = await WebhookClient.new(http, gateway_here)
    created = await owner.created(url=dropper.url, filter_type="signal")
    dropper.hold = asyncio.Event()
    under_way = await enqueue(pool, Hook(created["id"], owner.pubkey, ""), price=1)

    async with dispatching(pool) as dispatcher:
        await eventually(lambda: is_true(dropper.reading == 1), "the delivery read by the receiver")
        gone = await owner.delete(created["id"])
        assert gone.status == 200 and gone.json["cancelled_jobs"] == 1
        dropper.hold.set()
        await eventually(lambda: is_true(dispatcher.stats.retried + dispatcher.stats.lost == 1), "its outcome")

    row = await job(pool, under_way)
    assert (row["status"], row["charged"], row["answered"]) == ("cancelled", 1, False)
    assert refs(await ledger(pool, owner.pubkey), under_way) == [("debit", -1)]
    assert await balance(pool, owner.pubkey) == STARTING_CREDITS - 1 and await conserved(pool, owner.pubkey)


async def test_a_webhook_paused_past_retention_refunds_only_what_never_reached_it(
    pool: asyncpg.Pool, dropper: ReadsAndDrops
) -> None:
    """Deliveries read and dropped, and deliveries that could not connect, wait for their retries when
    their webhooks are paused; paused longer than the retention, their jobs are cancelled: only the
    unreached ones are refunded."""
    pubkey = await account(pool, 100_000)
    reading = await subscribe(pool, dropper.url, pubkey, signal=True)
    refusing = await subscribe(pool, nowhere(), pubkey, signal=True)
    read = [await enqueue(pool, reading, price=PRICE) for _ in range(2)]
    unreached = [await enqueue(pool, refusing, price=PRICE) for _ in range(2)]

    async def attempted_once() -> bool:
        rows = await pool.fetch("SELECT status, attempts FROM delivery_jobs WHERE id = ANY($1)", [*read, *unreached])
        return {(r["status"], r["attempts"]) for r in rows} == {("pending", 1)}

    async with dispatching(pool, retry=fixed_delays([3600])):
        await eventually(attempted_once, "every delivery attempted once, its retry an hour away")
    for hook in (reading, refusing):
        assert await webhooks.pause(pool, hook.id, "paused by the test")
    await pool.execute(
        "UPDATE webhooks SET paused_at = now() - interval '10 days' WHERE id = ANY($1)", [reading.id, refusing.id]
    )
    assert await webhooks.expire_paused(pool, 7) == 4

    entries = await ledger(pool, pubkey)
    for job_id in read:
        assert ((await job(pool, job_id))["status"], refs(entries, job_id)) == ("cancelled", [("debit", -PRICE)])
    for job_id in unreached:
        assert refs(entries, job_id) == [("debit", -PRICE), ("refund", PRICE)]
    assert await balance(pool, pubkey) == 10_000 - 2 * PRICE and await conserved(pool, pubkey)


async def test_an_attempt_under_way_at_a_delete_that_never_connects_is_refunded_with_its_outcome(
    pool: asyncpg.Pool, gateway_here: RunningGateway, http: aiohttp.ClientSession
) -> None:
    """The other side of the rule above: the cancel leaves an attempt under way its charge, and the
    attempt's outcome, written on the cancelled job, gives it back when it never reached the receiver
    (a failed connection). A job whose lease had passed at the delete (its dispatcher gone, no outcome
    to come) is refunded with the cancel. The claims, charges and outcomes are the dispatcher's own
    calls (:mod:`gateway.webhooks.store.jobs`), made here one at a time to hold the attempt under way."""
    owner = await WebhookClient.new(http, gateway_here)
    created = await owner.created(url=nowhere(), filter_type="signal")
    hook = Hook(created["id"], owner.pubkey, "")
    under_way, lapsed = await enqueue(pool, hook, price=1), await enqueue(pool, hook, price=1)
    claimed = {j.id: j for j in await delivery_jobs.claim(pool, "gone", 10, ClaimRules(30, 10))}
    for job_id in (under_way, lapsed):
        assert await delivery_jobs.charge(pool, "gone", claimed[job_id]) is delivery_jobs.Charge.CHARGED
    await pool.execute("UPDATE delivery_jobs SET locked_until = now() - interval '1 second' WHERE id = $1", lapsed)

    gone = await owner.delete(created["id"])
    assert gone.status == 200 and gone.json["cancelled_jobs"] == 2
    entries = await ledger(pool, owner.pubkey)
    assert refs(entries, under_way) == [("debit", -1)]  # its attempt may yet reach the receiver
    assert refs(entries, lapsed) == [("debit", -1), ("refund", 1)]

    failed = Outcome(under_way, claimed[under_way].attempts, Result.RETRY, error="connection failed", delay_s=5)
    assert await delivery_jobs.record(pool, "gone", [failed]) == {under_way}
    assert refs(await ledger(pool, owner.pubkey), under_way) == [("debit", -1), ("refund", 1)]
    assert ((await job(pool, under_way))["status"], (await job(pool, under_way))["charged"]) == ("cancelled", 0)
    assert await balance(pool, owner.pubkey) == STARTING_CREDITS and await conserved(pool, owner.pubkey)
