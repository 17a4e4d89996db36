"""Where webhook jobs come from, on the real parts: PostgreSQL, Redis and the session's devnode.

Lifecycle events are written in the transaction of their cause (a real deposit, a settle crossing the
low-balance line, a rotation, an expiry pass); transaction watches turn real transfers on the devnode
into jobs (stream and poll, resumable); the signal follower turns the signal log into priced jobs.
Subscriptions are rows inserted here with SQL: the management routes are tested elsewhere.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import orjson
import pytest
import redis.asyncio as aioredis
from solana.rpc.async_api import AsyncClient
from solders.keypair import Keypair
from solders.pubkey import Pubkey
from solders.signature import Signature
from solders.system_program import TransferParams, transfer
from spl.memo.constants import MEMO_PROGRAM_ID
from spl.memo.instructions import create_memo
from spl.memo.models import MemoParams
from spl.token.instructions import create_idempotent_associated_token_account

from devnode.node import Devnode
from gateway.app.settings import Settings
from gateway.auth.api_keys import ApiKeyStore
from gateway.auth.store.accounts import ApiKeyRows
from gateway.core.credits import CreditPolicy, DepositCredit, UsageRecord
from gateway.core.subscriptions import SIGNAL_EVENT_CREDITS
from gateway.core.webhook_events import iso8601
from gateway.credits.confirm import confirm_deposit
from gateway.credits.store import credit_deposit, credit_deposit_on
from gateway.credits.watcher import DepositWatcher
from gateway.node.http import HttpUpstream
from gateway.node.pubsub import UpstreamPubSub
from gateway.signals.rules import SignalEvent
from gateway.signals.store import SignalLog
from gateway.storage import sends
from gateway.storage.channels import Channel
from gateway.storage.ledger import expire_due, lease, settle
from gateway.webhooks.rules import TRANSACTION_DELIVERY_CREDITS
from gateway.webhooks.sources import SignalWebhooks, TransactionWatches
from gateway.webhooks.watcher_actor import WebhookWatcherActor
from tests.chain import (
    USDC_MINT,
    airdrop,
    mint_usdc,
    send,
    send_sol,
    submit,
    transfer_usdc_instruction,
    usdc_account,
    wait_landed,
)
from tests.credits.helpers import fund, new_pubkey, new_signature

POLICY = CreditPolicy(credits_per_usdc=100_000, credit_expiry_seconds=90 * 86_400)


# ------------------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    p = await asyncpg.create_pool(database_url, min_size=2, max_size=10)
    yield p
    await p.close()


@dataclass
class Chain:
    url: str
    ws_url: str
    client: AsyncClient
    upstream: HttpUpstream
    usdc_authority: Keypair
    deposit_wallet: Keypair

    @property
    def deposit_ata(self) -> Pubkey:
        return usdc_account(self.deposit_wallet.pubkey())


@pytest.fixture(scope="module")
async def chain(devnode: Devnode) -> AsyncIterator[Chain]:
    """The session devnode, and a deposit wallet of this module's own with its USDC account."""
    client, upstream = AsyncClient(devnode.rpc_url), HttpUpstream(devnode.rpc_url)
    try:
        payer, wallet = await funded(devnode.rpc_url), Keypair()
        ata = create_idempotent_associated_token_account(payer.pubkey(), wallet.pubkey(), USDC_MINT)
        await send(client, payer, [ata], finalized=True)
        yield Chain(devnode.rpc_url, devnode.ws_url, client, upstream, devnode.usdc_mint_authority, wallet)
    finally:
        await upstream.close()
        await client.close()


# ------------------------------------------------------------------------------------------- helpers


async def funded(url: str) -> Keypair:
    wallet = Keypair()
    await airdrop(url, wallet.pubkey(), 5 * 10**9)
    return wallet


async def account(db: asyncpg.Connection, pubkey: str | Keypair) -> str:
    key = str(pubkey.pubkey()) if isinstance(pubkey, Keypair) else pubkey
    await db.execute("INSERT INTO accounts (pubkey) VALUES ($1) ON CONFLICT DO NOTHING", key)
    return key


async def paying(pool: asyncpg.Pool, payer: Keypair) -> str:
    """An account with credits for its transaction watches' deliveries: the watcher pauses the watches of
    an account whose balance is below one delivery's price."""
    key = str(payer.pubkey())
    await fund(pool, key, 1_000)
    return key


async def webhook(
    db: asyncpg.Connection,
    pubkey: str,
    filter_type: str,
    *,
    filter_value: str | None = None,
    lifecycle: tuple[str, ...] = (),
    signals: tuple[str, ...] = (),
    status: str = "active",
) -> int:
    """A subscription row, as the management routes would store it."""
    webhook_id: int = await db.fetchval(
        """INSERT INTO webhooks
               (pubkey, url, filter_type, filter_value, lifecycle_events, signal_events, secret, status)
           VALUES ($1, 'https://receiver.example/hook', $2, $3, $4, $5, 'whsec_test', $6) RETURNING id""",
        pubkey,
        filter_type,
        filter_value,
        list(lifecycle),
        list(signals),
        status,
    )
    return webhook_id


@dataclass(frozen=True)
class Job:
    event_type: str
    payload: Any
    dedupe_key: str | None
    price: int
    status: str


async def jobs(db: asyncpg.Connection | asyncpg.Pool, webhook_id: int) -> list[Job]:
    rows = await db.fetch(
        "SELECT event_type, payload, dedupe_key, price, status FROM delivery_jobs WHERE webhook_id = $1 ORDER BY id",
        webhook_id,
    )
    return [Job(r["event_type"], orjson.loads(r["payload"]), r["dedupe_key"], r["price"], r["status"]) for r in rows]


async def signatures(db: asyncpg.Connection, webhook_id: int) -> list[str]:
    return [str(job.dedupe_key) for job in await jobs(db, webhook_id)]


def usage(credits: int) -> UsageRecord:
    return UsageRecord("getBlock", credits, False, "req", datetime.now(UTC))


async def eventually(predicate: Callable[[], Awaitable[bool]], limit_s: float = 30.0) -> None:
    """Wait for ``predicate`` (a bound on a hang, not a timing assertion)."""
    deadline = asyncio.get_running_loop().time() + limit_s
    while not await predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.05)


async def failed_transfer(chain: Chain, payer: Keypair, to: Pubkey) -> Signature:
    """A transfer of more lamports than ``payer`` has, sent without preflight: it lands, and fails."""
    ix = transfer(TransferParams(from_pubkey=payer.pubkey(), to_pubkey=to, lamports=10**15))
    sig = await submit(chain.client, payer, [ix], skip_preflight=True)
    assert (await wait_landed(chain.client, sig)).err is not None
    return sig


# ---------------------------------------------------------------------------------- lifecycle events


async def test_a_real_deposit_writes_one_deposit_credited_job(
    chain: Chain, pool: asyncpg.Pool, db: asyncpg.Connection
) -> None:
    alice = await funded(chain.url)
    await mint_usdc(chain.client, chain.usdc_authority, alice, alice.pubkey(), 2_000_000)
    owner = await account(db, alice)
    hook = await webhook(db, owner, "lifecycle", lifecycle=("deposit.credited", "low_balance"))
    unlisted = await webhook(db, owner, "lifecycle", lifecycle=("low_balance",))
    paused = await webhook(db, owner, "lifecycle", lifecycle=("deposit.credited",), status="paused")
    sig = await send(
        chain.client, alice, [transfer_usdc_instruction(alice.pubkey(), chain.deposit_wallet.pubkey(), 1_500_000)]
    )
    await wait_landed(chain.client, sig, finalized=True)

    watcher = DepositWatcher(pool, chain.upstream, POLICY, str(chain.deposit_ata), str(USDC_MINT))
    await watcher.run_once()
    again = await confirm_deposit(
        pool, chain.upstream, str(sig), POLICY, str(chain.deposit_ata), str(USDC_MINT), caller=owner
    )
    assert again.outcome.already_processed

    slot = await db.fetchval("SELECT slot FROM deposits WHERE signature = $1", str(sig))
    assert await jobs(db, hook) == [
        Job(
            "deposit.credited",
            {
                "signature": str(sig),
                "amount_base_units": 1_500_000,
                "credits": 150_000,
                "bonus_credits": 0,
                "balance": 150_000,
                "slot": slot,
            },
            str(sig),
            0,
            "pending",
        )
    ]
    assert await jobs(db, unlisted) == [] and await jobs(db, paused) == []


class Rollback(Exception):
    pass


async def test_a_credit_that_rolls_back_writes_no_job(pool: asyncpg.Pool, db: asyncpg.Connection) -> None:
    owner = await account(db, new_pubkey())
    hook = await webhook(db, owner, "lifecycle", lifecycle=("deposit.credited",))
    deposit = DepositCredit(new_signature(), owner, 500_000, slot=3)
    async with pool.acquire() as conn:
        with pytest.raises(Rollback):
            async with conn.transaction():
                assert (await credit_deposit_on(conn, deposit, POLICY)).credited
                written = await conn.fetchval("SELECT count(*) FROM delivery_jobs WHERE webhook_id = $1", hook)
                assert written == 1  # written by the credit's own transaction...
                raise Rollback  # ...which then fails as a whole
    assert await jobs(db, hook) == []
    assert await db.fetchval("SELECT count(*) FROM deposits WHERE signature = $1", deposit.signature) == 0

    await credit_deposit(pool, deposit, POLICY)
    await credit_deposit(pool, deposit, POLICY)  # already processed: nothing more
    assert [job.payload["credits"] for job in await jobs(db, hook)] == [50_000]


async def test_low_balance_once_per_crossing(pool: asyncpg.Pool, db: asyncpg.Connection) -> None:
    owner = await account(db, new_pubkey())
    hook = await webhook(db, owner, "lifecycle", lifecycle=("low_balance",))
    await fund(pool, owner, 1_010)
    grant = await lease(pool, owner, "r1", 100, 30)
    assert grant is not None and grant.lease_id is not None
    await settle(pool, grant.lease_id, [usage(5)], release=False)  # 1,005: above the line
    assert await jobs(db, hook) == []
    await settle(pool, grant.lease_id, [usage(10)], release=False)  # 995: crossed
    await settle(pool, grant.lease_id, [usage(10)], release=True)  # 985: still below, no second job
    assert [job.payload for job in await jobs(db, hook)] == [{"balance": 995, "threshold": 1_000}]

    await fund(pool, owner, 1_000)  # 1,985: above again, so the next crossing counts
    grant = await lease(pool, owner, "r1", 1_000, 30)
    assert grant is not None and grant.lease_id is not None
    await settle(pool, grant.lease_id, [usage(990)], release=True)  # 995
    found = await jobs(db, hook)
    assert [(job.event_type, job.payload["balance"]) for job in found] == [("low_balance", 995)] * 2


async def test_a_send_charge_crossing_the_line_writes_low_balance(pool: asyncpg.Pool, db: asyncpg.Connection) -> None:
    owner = await account(db, new_pubkey())
    hook = await webhook(db, owner, "lifecycle", lifecycle=("low_balance",))
    await fund(pool, owner, 1_050)
    signature = new_signature()
    held = await sends.hold(pool, owner, signature, "blockhash", 100, 5, "req")
    assert held.outcome == sends.HoldOutcome.HELD
    await sends.settle(pool, signature, sends.SendStatus.CONFIRMED)
    await sends.settle(pool, signature, sends.SendStatus.CONFIRMED)  # settled once
    assert [job.payload for job in await jobs(db, hook)] == [{"balance": 950, "threshold": 1_000}]


async def test_api_key_rotated_on_each_rotation(
    pool: asyncpg.Pool, db: asyncpg.Connection, redis_client: aioredis.Redis
) -> None:
    owner = await account(db, new_pubkey())
    hook = await webhook(db, owner, "lifecycle", lifecycle=("api_key.rotated",))
    store = ApiKeyStore(ApiKeyRows(pool), Channel(redis_client, f"test:{uuid.uuid4().hex}"), os.urandom(32))
    first = await store.rotate(owner, None)
    second = await store.rotate(owner, None)
    created = await db.fetch("SELECT created_at FROM api_keys WHERE pubkey = $1 ORDER BY id", owner)
    found = await jobs(db, hook)
    assert [job.payload for job in found] == [
        {"key_prefix": first[:14], "rotated_at": iso8601(created[0]["created_at"]), "replaced_previous": False},
        {"key_prefix": second[:14], "rotated_at": iso8601(created[1]["created_at"]), "replaced_previous": True},
    ]
    assert all(job.event_type == "api_key.rotated" for job in found)
    assert first not in orjson.dumps([job.payload for job in found]).decode()


async def test_credits_expiring_once_per_batch_within_a_day(pool: asyncpg.Pool, db: asyncpg.Connection) -> None:
    owner = await account(db, new_pubkey())
    await fund(pool, owner, 300, expiry_s=10 * 3600)
    await fund(pool, owner, 200, expiry_s=48 * 3600)
    hook = await webhook(db, owner, "lifecycle", lifecycle=("credits.expiring",))
    batches = await db.fetch("SELECT id, expires_at FROM credit_batches WHERE pubkey = $1 ORDER BY granted DESC", owner)
    soon, later = batches[0], batches[1]

    await expire_due(pool)
    await expire_due(pool)  # the flag holds: no second job
    expected = [{"batch_id": soon["id"], "remaining": 300, "expires_at": iso8601(soon["expires_at"])}]
    assert [job.payload for job in await jobs(db, hook)] == expected
    assert [job.dedupe_key for job in await jobs(db, hook)] == [f"batch:{soon['id']}"]

    moved = await db.fetchval(
        "UPDATE credit_batches SET expires_at = now() + interval '2 hours' WHERE id = $1 RETURNING expires_at",
        later["id"],
    )
    await expire_due(pool)
    expected.append({"batch_id": later["id"], "remaining": 200, "expires_at": iso8601(moved)})
    assert [job.payload for job in await jobs(db, hook)] == expected


# ------------------------------------------------------------------------------- transaction watches


async def test_a_transfer_to_a_watched_account_makes_one_job_a_failed_one_none(
    chain: Chain, pool: asyncpg.Pool, db: asyncpg.Connection
) -> None:
    payer, target = await funded(chain.url), Keypair().pubkey()
    owner = await paying(pool, payer)
    watched = await webhook(db, owner, "account", filter_value=str(target))
    mine = await webhook(db, owner, "my_account")  # the owner's own key, filter_value left out
    ok = await send_sol(chain.client, payer, target, 5_000_000)
    bad = await failed_transfer(chain, payer, target)

    watches = TransactionWatches(pool, chain.upstream)
    await watches.poll_all()
    await watches.poll_all()  # from the cursor: nothing new

    [job] = await jobs(db, watched)
    status = (await chain.client.get_signature_statuses([ok])).value[0]
    assert status is not None
    block_time = (await chain.client.get_block_time(status.slot)).value
    assert job == Job(
        "transaction",
        {
            "signature": str(ok),
            "slot": status.slot,
            "block_time": block_time,
            "err": None,
            "memo": None,
            "watched": str(target),
            "filter_type": "account",
        },
        str(ok),
        TRANSACTION_DELIVERY_CREDITS,  # paid, as a logsSubscribe notification of it would be
        "pending",
    )
    own = await signatures(db, mine)
    assert str(ok) in own and str(bad) not in own and len(own) == len(set(own))
    assert all(job.payload["filter_type"] == "my_account" for job in await jobs(db, mine))
    cursor = await db.fetchval("SELECT last_signature FROM webhook_watch_cursors WHERE address = $1", str(target))
    assert cursor == str(bad)  # past the failed one too: it is never looked at again


async def test_a_program_watch(chain: Chain, pool: asyncpg.Pool, db: asyncpg.Connection) -> None:
    payer = await funded(chain.url)
    owner = await paying(pool, payer)
    hook = await webhook(db, owner, "program", filter_value=str(MEMO_PROGRAM_ID))
    memo = MemoParams(program_id=MEMO_PROGRAM_ID, signer=payer.pubkey(), message=b"hello webhook")
    ok = await send(chain.client, payer, [create_memo(memo)])
    invalid = MemoParams(program_id=MEMO_PROGRAM_ID, signer=payer.pubkey(), message=b"\xff\xfe")  # not UTF-8
    bad = await submit(chain.client, payer, [create_memo(invalid)], skip_preflight=True)
    assert (await wait_landed(chain.client, bad)).err is not None

    await TransactionWatches(pool, chain.upstream).poll_all()
    found = {job.dedupe_key: job for job in await jobs(db, hook)}
    assert str(bad) not in found
    payload = found[str(ok)].payload
    assert (payload["watched"], payload["filter_type"]) == (str(MEMO_PROGRAM_ID), "program")
    assert "hello webhook" in payload["memo"]


async def test_the_stream_wakes_the_poll(chain: Chain, pool: asyncpg.Pool, db: asyncpg.Connection) -> None:
    """With the timer an hour away, only the stream's notification can start the poll that finds it."""
    payer, target = await funded(chain.url), Keypair().pubkey()
    owner = await paying(pool, payer)
    hook = await webhook(db, owner, "account", filter_value=str(target))
    pubsub = UpstreamPubSub(chain.ws_url)
    watches = TransactionWatches(pool, chain.upstream, pubsub, poll_s=3600, refresh_s=0.2)
    stop = asyncio.Event()
    running = asyncio.create_task(watches.run(stop))
    try:

        async def idle() -> bool:
            wait = watches.next_poll_in(str(target))
            return watches.streamed(str(target)) and wait is not None and wait > 600

        await eventually(idle)
        ok = await send_sol(chain.client, payer, target, 1_000_000)
        await failed_transfer(chain, payer, target)

        async def delivered() -> bool:
            return await signatures(db, hook) == [str(ok)]

        await eventually(delivered)
        assert watches.stats.notifications >= 1
    finally:
        stop.set()
        await running
        await pubsub.close()
    assert await signatures(db, hook) == [str(ok)]


async def test_a_restarted_watcher_catches_up_without_duplicates(
    chain: Chain, pool: asyncpg.Pool, db: asyncpg.Connection
) -> None:
    payer, target = await funded(chain.url), Keypair().pubkey()
    owner = await paying(pool, payer)
    hook = await webhook(db, owner, "account", filter_value=str(target))
    first = await send_sol(chain.client, payer, target, 1_000_000)
    stop = asyncio.Event()
    before = TransactionWatches(pool, chain.upstream, poll_s=0.1, refresh_s=0.1)
    running = asyncio.create_task(before.run(stop))

    async def has(count: int) -> bool:
        return len(await signatures(db, hook)) >= count

    await eventually(lambda: has(1))
    stop.set()
    await running

    # while no watcher runs
    missed = [await send_sol(chain.client, payer, target, 1_000_000 + n) for n in range(2)]
    bad = await failed_transfer(chain, payer, target)

    pubsub = UpstreamPubSub(chain.ws_url)
    after = TransactionWatches(pool, chain.upstream, pubsub, poll_s=0.1, refresh_s=0.1)
    stop = asyncio.Event()
    running = asyncio.create_task(after.run(stop))
    try:
        await eventually(lambda: has(3))
        await after.poll_all()  # the stream and the timer have both been through: still one job each
    finally:
        stop.set()
        await running
        await pubsub.close()
    assert await signatures(db, hook) == [str(first), *map(str, missed)]
    assert str(bad) not in await signatures(db, hook)


async def test_a_subscription_never_receives_older_transactions(
    chain: Chain, pool: asyncpg.Pool, db: asyncpg.Connection
) -> None:
    payer, target = await funded(chain.url), Keypair().pubkey()
    owner = await paying(pool, payer)
    early = await webhook(db, owner, "account", filter_value=str(target))
    old = await send_sol(chain.client, payer, target, 1_000_000)
    watches = TransactionWatches(pool, chain.upstream)
    await watches.poll_all()
    late = await webhook(db, owner, "account", filter_value=str(target))
    await db.execute("UPDATE webhooks SET created_at = now() + interval '1 hour' WHERE id = $1", late)
    await db.execute("DELETE FROM webhook_watch_cursors WHERE address = $1", str(target))  # re-read it all
    new = await send_sol(chain.client, payer, target, 2_000_000)
    await watches.poll_all()
    assert await signatures(db, early) == [str(old), str(new)]
    assert await signatures(db, late) == []  # created (as far as it knows) after both


async def test_the_actor_runs_the_watches_from_settings(
    chain: Chain, pool: asyncpg.Pool, db: asyncpg.Connection, database_url: str, redis_url: str, tmp_path: Path
) -> None:
    payer, target = await funded(chain.url), Keypair().pubkey()
    owner = await paying(pool, payer)
    hook = await webhook(db, owner, "account", filter_value=str(target))
    settings = Settings(
        home=tmp_path,
        database_url=database_url,
        redis_url=redis_url,
        upstream_rpc_url=chain.url,
        upstream_ws_url=chain.ws_url,
    )
    actor = WebhookWatcherActor(settings.model_dump(mode="json"))
    try:

        async def following() -> bool:
            return actor.watches is not None and str(target) in actor.watches.addresses

        await eventually(following)
        ok = await send_sol(chain.client, payer, target, 1_000_000)

        async def delivered() -> bool:
            return await signatures(db, hook) == [str(ok)]

        await eventually(delivered)
        assert actor.status()["running"]
    finally:
        await asyncio.to_thread(actor.shutdown)
    assert not actor.status()["running"]


# ------------------------------------------------------------------------------------------- signals


def signal(kind: Any, slot: int, n: int) -> SignalEvent:
    return SignalEvent(kind, "6EF8rrecthR5Dkzon8Nwu78hRvfCKubJ14M5uBEwF6P", new_signature(), slot, mint=f"mint{n}")


@pytest.fixture
async def signal_log(redis_client: aioredis.Redis) -> AsyncIterator[SignalLog]:
    """A signal log of the test's own (the session's Redis is shared), removed after it."""
    prefix = f"test-webhook-signals-{uuid.uuid4().hex[:8]}"
    yield SignalLog(redis_client, prefix=prefix)
    keys = [key async for key in redis_client.scan_iter(match=f"{prefix}:*")]
    if keys:
        await redis_client.delete(*keys)


async def test_signal_webhooks_get_one_priced_job_per_matching_event(
    pool: asyncpg.Pool, db: asyncpg.Connection, signal_log: SignalLog
) -> None:
    owner = await account(db, new_pubkey())
    every = await webhook(db, owner, "signal")
    graduations = await webhook(db, owner, "signal", signals=("graduation",))
    paused = await webhook(db, owner, "signal", status="paused")
    await signal_log.append_slot(10, [signal("newPair", 10, 0)])  # before the follower's first start
    follower = SignalWebhooks(pool, signal_log)
    await follower.position()  # the first start begins at the newest event: the log is not replayed

    events = [signal("newPair", 11, 1), signal("graduation", 11, 2)]
    ids = await signal_log.append_slot(11, events)
    assert await follower.run_once() == 2
    assert await follower.run_once() == 0

    assert await jobs(db, every) == [
        Job(f"signal.{e.kind}", e.to_json(), id_, SIGNAL_EVENT_CREDITS, "pending")
        for id_, e in zip(ids, events, strict=True)
    ]
    assert [(job.event_type, job.dedupe_key) for job in await jobs(db, graduations)] == [("signal.graduation", ids[1])]
    assert await jobs(db, paused) == []


async def test_signal_webhooks_resume_without_loss_or_duplicates(
    pool: asyncpg.Pool, db: asyncpg.Connection, signal_log: SignalLog
) -> None:
    owner = await account(db, new_pubkey())
    hook = await webhook(db, owner, "signal")
    first = SignalWebhooks(pool, signal_log)
    await first.position()
    ids = await signal_log.append_slot(20, [signal("newPair", 20, 0)])
    assert await first.run_once() == 1

    # stopped; the classifier goes on
    ids += await signal_log.append_slot(21, [signal("newPair", 21, 1), signal("largeSwap", 21, 2)])
    restarted = SignalWebhooks(pool, signal_log)
    assert await restarted.run_once() == 2
    assert await signatures(db, hook) == ids

    # a pass repeated (its position lost after the jobs were written) adds nothing
    await db.execute("UPDATE webhook_source_positions SET position = $2 WHERE source = $1", signal_log.stream, "0-0")
    again = SignalWebhooks(pool, signal_log)
    assert await again.run_once() == 3
    assert await signatures(db, hook) == ids
