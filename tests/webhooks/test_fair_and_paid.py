"""Webhooks that share the dispatchers fairly and pay their way (docs/api.md, Webhooks): one account's
share of the deliveries in flight, paid transaction deliveries, refunds of cancelled deliveries nobody
received, and webhooks paused after too many dead deliveries in a row.

Real parts throughout: the module's own PostgreSQL database, dispatchers in this process, a real
receiver on 127.0.0.1, the session's devnode, and a gateway in this process on the same database for
the ``/webhooks`` routes. No assertion is about how fast anything happened: waits end on what the
database or the receiver shows, and their limits only bound a hang.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import aiohttp
import asyncpg
import orjson
from solana.rpc.async_api import AsyncClient
from solders.keypair import Keypair

from devnode.node import Devnode
from gateway.node.http import HttpUpstream
from gateway.runtime.ports import free_port
from gateway.webhooks.dispatcher import DispatchConfig, fixed_delays
from gateway.webhooks.events import LIFECYCLE_EVENTS
from gateway.webhooks.rules import TRANSACTION_DELIVERY_CREDITS, new_secret, pricing_view
from gateway.webhooks.sources import TransactionWatches
from gateway.webhooks.store import subscriptions as webhooks
from tests.chain import airdrop, send_sol
from tests.support import RunningGateway
from tests.webhooks.conftest import STARTING_CREDITS, WebhookClient
from tests.webhooks.support import (
    Answer,
    Hook,
    Receiver,
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
    spend,
    subscribe,
)


def event(hook_id: int, job_id: int) -> str:
    return f"evt_{hook_id}_{job_id}"


def paused(pool: asyncpg.Pool, webhook_id: int) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return bool(await pool.fetchval("SELECT status = 'paused' FROM webhooks WHERE id = $1", webhook_id))

    return check


# -- one account's share of the deliveries in flight ---------------------------------------------------


async def test_one_accounts_hanging_receivers_cannot_stall_another_accounts_delivery(
    pool: asyncpg.Pool, receiver: Receiver
) -> None:
    """Four webhooks of one account whose receiver hangs, each allowed 4 deliveries at once: together
    enough to fill both dispatchers (8 claims each), so without a share per account another account's
    event would wait for their attempts to time out (120 s). With ``per_account`` 3 it goes past them."""
    greedy = await account(pool)
    hooks = [await subscribe(pool, receiver.url, greedy) for _ in range(4)]
    for hook in hooks:
        receiver.hold[hook.id] = asyncio.Event()
        receiver.group[hook.id] = "greedy"
    backlog = [await enqueue(pool, hooks[n % 4]) for n in range(40)]
    config = DispatchConfig(
        concurrency=4,
        per_webhook=4,
        per_account=3,
        total_slots=8,  # the two dispatchers' slots, as the actors are told
        timeout_s=120,
        lease_s=300,
        allow_private=True,
        poll_s=0.05,
    )
    assert 2 * config.in_hand <= len(hooks) * config.per_webhook  # what the account could take without its share

    async with dispatching(pool, config, name="a"), dispatching(pool, config, name="b"):
        await eventually(lambda: is_true(receiver.group_in_flight["greedy"] >= 3), "the greedy account's share out")
        other = await subscribe(pool, receiver.url)  # another account
        prompt = await enqueue(pool, other)
        await eventually(settled(pool, prompt), "another account's delivery, the greedy one's hanging", timeout_s=30)
        assert receiver.group_in_flight["greedy"] == 3  # still hanging: it went past them, not after them
        for hook in hooks:
            receiver.hold[hook.id].set()
        await eventually(settled(pool, *backlog), "the greedy account's deliveries once its receiver answers")

    assert (await job(pool, prompt))["status"] == "delivered"
    assert receiver.group_most["greedy"] == 3  # over both dispatchers, never more
    statuses = await pool.fetch("SELECT status FROM delivery_jobs WHERE id = ANY($1)", backlog)
    assert [r["status"] for r in statuses] == ["delivered"] * len(backlog)


async def test_four_accounts_whose_receivers_hang_leave_a_share_of_the_slots_to_a_fifth(
    pool: asyncpg.Pool, receiver: Receiver
) -> None:
    """Four accounts, each a webhook whose receiver never answers and a backlog, each allowed 2
    deliveries at once: together all 8 slots of the one dispatcher, so without a share cut from the
    slots a fifth account's event would wait for their attempts to time out (120 s)."""
    hooks = [await subscribe(pool, receiver.url, await account(pool)) for _ in range(4)]
    for n, hook in enumerate(hooks):
        receiver.hold[hook.id] = asyncio.Event()
        receiver.group[hook.id] = f"greedy{n}"
    backlog = [await enqueue(pool, hooks[n % 4]) for n in range(40)]
    config = DispatchConfig(
        concurrency=8, per_webhook=8, per_account=2, timeout_s=120, lease_s=300, allow_private=True, poll_s=0.05
    )
    assert len(hooks) * config.per_account == config.concurrency  # what they could hold without the share

    async with dispatching(pool, config):
        await eventually(lambda: is_true(sum(receiver.group_in_flight.values()) >= 4), "the greedy deliveries out")
        other = await subscribe(pool, receiver.url)  # a fifth account
        prompt = await enqueue(pool, other)
        await eventually(settled(pool, prompt), "a fifth account's delivery, the others hanging", timeout_s=30)
        hanging = sum(receiver.group_in_flight[f"greedy{n}"] for n in range(4))
        assert hanging == 4  # one each: 8 slots / (4 accounts + 1)
        for hook in hooks:
            receiver.hold[hook.id].set()
        await eventually(settled(pool, *backlog), "the backlog once the receivers answer")
    assert (await job(pool, prompt))["status"] == "delivered"
    assert max(receiver.group_most[f"greedy{n}"] for n in range(4)) == 1


# -- transaction deliveries are paid -------------------------------------------------------------------


async def test_a_transaction_delivery_is_charged_and_an_account_that_cannot_pay_is_paused(
    pool: asyncpg.Pool, receiver: Receiver, devnode: Devnode
) -> None:
    """A real transfer to a watched address: the watch writes a priced job per webhook, the dispatcher
    charges the paying account before posting it, and pauses the webhook of an account with nothing
    left (it spent its credits on calls after the watch had written the job), sending nothing."""
    client, upstream = AsyncClient(devnode.rpc_url), HttpUpstream(devnode.rpc_url)
    try:
        payer, target = Keypair(), Keypair().pubkey()
        await airdrop(devnode.rpc_url, payer.pubkey(), 5 * 10**9)
        paying, broke = await account(pool, 100_000), await account(pool, 10_000)  # 10,000 credits; 1,000
        watch = webhooks.NewWebhook(receiver.url, "account", filter_value=str(target))
        hooks = {}
        for owner in (paying, broke):
            created = await webhooks.create(pool, owner, watch, new_secret(), max_per_account=25)
            assert isinstance(created, webhooks.Webhook)
            hooks[owner] = created.id
        signature = await send_sol(client, payer, target, 1_000_000)
        assert await TransactionWatches(pool, upstream).poll_all() == 2
        await spend(pool, broke, 1_000)  # all its credits, on calls, before the deliveries go out
    finally:
        await upstream.close()
        await client.close()

    found = await pool.fetch("SELECT * FROM delivery_jobs WHERE webhook_id = ANY($1)", list(hooks.values()))
    rows = {r["webhook_id"]: r for r in found}
    assert {r["price"] for r in rows.values()} == {TRANSACTION_DELIVERY_CREDITS}
    paid, unpaid = rows[hooks[paying]]["id"], rows[hooks[broke]]["id"]
    async with dispatching(pool):
        await eventually(settled(pool, paid), "the paid delivery")
        await eventually(paused(pool, hooks[broke]), "the unpaid webhook paused")

    (delivered,) = receiver.received
    assert delivered.event_id == event(hooks[paying], paid)
    assert orjson.loads(delivered.body)["data"]["signature"] == str(signature)
    assert (await job(pool, paid))["charged"] == TRANSACTION_DELIVERY_CREDITS
    assert (await ledger(pool, paying))[1:] == [("debit", -TRANSACTION_DELIVERY_CREDITS, f"delivery:{paid}")]
    assert await balance(pool, paying) == 10_000 - TRANSACTION_DELIVERY_CREDITS and await conserved(pool, paying)

    waiting = await job(pool, unpaid)
    assert (waiting["status"], waiting["attempts"], waiting["charged"]) == ("pending", 0, 0)
    reason = await pool.fetchval("SELECT paused_reason FROM webhooks WHERE id = $1", hooks[broke])
    assert reason == f"insufficient credits: a delivery costs {TRANSACTION_DELIVERY_CREDITS}, 0 available"
    assert [entry for entry in await ledger(pool, broke) if entry[2] == f"delivery:{unpaid}"] == []
    assert await balance(pool, broke) == 0 and await conserved(pool, broke)


async def test_pricing_publishes_the_webhook_prices(gateway_here: RunningGateway, http: aiohttp.ClientSession) -> None:
    async with http.get(gateway_here.url + "/pricing") as resp:
        assert resp.status == 200
        document = await resp.json()
    assert document["webhooks"] == pricing_view()
    assert document["webhooks"]["transaction_delivery_credits"] == TRANSACTION_DELIVERY_CREDITS
    assert document["webhooks"]["signal_delivery_credits"] == document["websocket"]["signal_event_credits"]
    # the one list of lifecycle events, served: the account page offers them from this field
    assert document["webhooks"]["lifecycle_events"] == list(LIFECYCLE_EVENTS)


# -- deleting a webhook refunds what nobody received ---------------------------------------------------


async def test_deleting_a_webhook_refunds_the_deliveries_nobody_received(
    pool: asyncpg.Pool, receiver: Receiver, gateway_here: RunningGateway, http: aiohttp.ClientSession
) -> None:
    """Five signal deliveries charged, their receiver unreachable, each waiting an hour for its retry;
    one more charged and answered 503 by its receiver. Deleting the first webhook cancels its five and
    refunds them in the same transaction; the answered one was received, and its charge stays."""
    owner = await WebhookClient.new(http, gateway_here)
    nowhere = await owner.created(url=f"http://127.0.0.1:{free_port()}/hook", filter_type="signal")
    answering = await owner.created(url=receiver.url, filter_type="signal")
    unreached = [await enqueue(pool, Hook(nowhere["id"], owner.pubkey, ""), price=1) for _ in range(5)]
    answered = await enqueue(pool, Hook(answering["id"], owner.pubkey, ""), price=1)
    receiver.default = Answer(503, "busy")
    every = [*unreached, answered]

    async def waiting_charged() -> bool:
        rows = await pool.fetch("SELECT status, attempts, charged FROM delivery_jobs WHERE id = ANY($1)", every)
        return {(r["status"], r["attempts"], r["charged"]) for r in rows} == {("pending", 1, 1)}

    async with dispatching(pool, retry=fixed_delays([3600])):
        await eventually(waiting_charged, "every delivery charged, attempted once, its retry an hour away")
    assert await balance(pool, owner.pubkey) == STARTING_CREDITS - 6

    gone = await owner.delete(nowhere["id"])
    assert gone.status == 200 and gone.json == {"ok": True, "id": nowhere["id"], "cancelled_jobs": 5}
    entries = await ledger(pool, owner.pubkey)
    for job_id in unreached:
        ref = f"delivery:{job_id}"
        assert [(kind, amount) for kind, amount, r in entries if r == ref] == [("debit", -1), ("refund", 1)]
    assert await balance(pool, owner.pubkey) == STARTING_CREDITS - 1 and await conserved(pool, owner.pubkey)
    for job_id in unreached:
        row = await job(pool, job_id)
        assert (row["status"], row["charged"], row["answered"]) == ("cancelled", 0, False)

    kept = await owner.delete(answering["id"])
    assert kept.status == 200 and kept.json["cancelled_jobs"] == 1
    row = await job(pool, answered)
    assert (row["status"], row["charged"], row["answered"], row["last_status"]) == ("cancelled", 1, True, 503)
    assert [e for e in await ledger(pool, owner.pubkey) if e[2] == f"delivery:{answered}"] == [
        ("debit", -1, f"delivery:{answered}")
    ]
    assert await balance(pool, owner.pubkey) == STARTING_CREDITS - 1 and await conserved(pool, owner.pubkey)


async def test_a_delivery_under_way_when_its_webhook_is_deleted_shows_the_receivers_answer(
    pool: asyncpg.Pool, receiver: Receiver, gateway_here: RunningGateway, http: aiohttp.ClientSession
) -> None:
    """A paid delivery is at the receiver, unanswered, when its webhook is deleted: the cancel leaves
    its charge to the attempt (it was sent). The receiver then takes it (200): the job shows it
    delivered and answered, the dispatcher counts it delivered rather than lost, and it stays charged."""
    owner = await WebhookClient.new(http, gateway_here)
    created = await owner.created(url=receiver.url, filter_type="signal")
    receiver.hold[created["id"]] = asyncio.Event()
    under_way = await enqueue(pool, Hook(created["id"], owner.pubkey, ""), price=1)

    async with dispatching(pool) as dispatcher:
        await eventually(lambda: is_true(receiver.in_flight[created["id"]] == 1), "the delivery at the receiver")
        gone = await owner.delete(created["id"])
        assert gone.status == 200 and gone.json["cancelled_jobs"] == 1
        receiver.hold[created["id"]].set()
        await eventually(lambda: is_true(dispatcher.stats.delivered + dispatcher.stats.lost == 1), "its outcome")
        assert (dispatcher.stats.delivered, dispatcher.stats.lost) == (1, 0)

    row = await job(pool, under_way)
    assert (row["status"], row["answered"], row["last_status"], row["charged"]) == ("delivered", True, 200, 1)
    assert [
        (kind, amount) for kind, amount, ref in await ledger(pool, owner.pubkey) if ref == f"delivery:{under_way}"
    ] == [("debit", -1)]
    assert await balance(pool, owner.pubkey) == STARTING_CREDITS - 1 and await conserved(pool, owner.pubkey)


# -- a webhook that keeps failing is paused ------------------------------------------------------------


async def test_a_webhook_whose_deliveries_keep_dying_is_paused_until_resumed(
    pool: asyncpg.Pool, receiver: Receiver, gateway_here: RunningGateway, http: aiohttp.ClientSession
) -> None:
    """One delivery at a time, in order: dead, dead, delivered (the streak starts again), then three
    dead in a row: paused, the reason shown by ``GET /webhooks``, the rest waiting unattempted until
    ``POST /webhooks/{id}/resume``."""
    owner = await WebhookClient.new(http, gateway_here)
    created = await owner.created(url=receiver.url, filter_type="lifecycle", lifecycle_events=["deposit.credited"])
    hook_id = created["id"]
    ids = [await enqueue(pool, Hook(hook_id, owner.pubkey, "")) for _ in range(8)]
    for job_id, status in zip(ids, (410, 404, 200, 400, 410, 401), strict=False):
        receiver.script[event(hook_id, job_id)] = [Answer(status, "no")]
    config = DispatchConfig(
        concurrency=2, per_webhook=1, pause_after_dead=3, timeout_s=2, lease_s=10, allow_private=True, poll_s=0.05
    )
    async with dispatching(pool, config) as dispatcher:
        await eventually(paused(pool, hook_id), "the webhook paused")
        await eventually(lambda: is_true(dispatcher.in_flight == 0), "nothing more out")

    rows = [await job(pool, job_id) for job_id in ids]
    assert [r["status"] for r in rows[:6]] == ["dead", "dead", "delivered", "dead", "dead", "dead"]
    assert [(r["status"], r["attempts"]) for r in rows[6:]] == [("pending", 0)] * 2
    assert len(receiver.received) == 6
    (listed,) = await owner.listed()
    assert listed["status"] == "paused"
    assert listed["paused_reason"] == (
        f"3 deliveries in a row ended dead (the last: HTTP 401): fix the receiver, then POST /webhooks/{hook_id}/resume"
    )

    answer = await owner.action(hook_id, "resume")
    assert answer.status == 200 and answer.json == {"ok": True, "id": hook_id, "resumed": True, "status": "active"}
    async with dispatching(pool, config):
        await eventually(settled(pool, *ids[6:]), "the waiting deliveries once resumed")
    assert [(await job(pool, job_id))["status"] for job_id in ids[6:]] == ["delivered"] * 2
    (listed,) = await owner.listed()
    assert (listed["status"], listed["paused_reason"]) == ("active", None)
    assert await pool.fetchval("SELECT consecutive_dead FROM webhooks WHERE id = $1", hook_id) == 0


async def test_a_suspended_accounts_free_lifecycle_delivery_waits_paused(
    pool: asyncpg.Pool, receiver: Receiver
) -> None:
    """Lifecycle deliveries are free, but a suspended account gets none: its webhook is paused with the
    reason and the job waits (pending) for a resume once the account is active again."""
    hook = await subscribe(pool, receiver.url)
    await pool.execute("UPDATE accounts SET status = 'suspended' WHERE pubkey = $1", hook.pubkey)
    waiting = await enqueue(pool, hook)  # price 0: a lifecycle event
    config = DispatchConfig(concurrency=2, per_webhook=2, timeout_s=5, lease_s=20, allow_private=True, poll_s=0.05)
    async with dispatching(pool, config):
        await eventually(paused(pool, hook.id), "the suspended account's webhook paused")
    assert receiver.received == []
    row = await job(pool, waiting)
    assert (row["status"], row["attempts"]) == ("pending", 0)
    reason = await pool.fetchval("SELECT paused_reason FROM webhooks WHERE id = $1", hook.id)
    assert reason == webhooks.SUSPENDED_REASON % hook.id
