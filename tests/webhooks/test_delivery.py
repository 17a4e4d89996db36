"""Durable webhook delivery: the dispatcher against real aiohttp receivers on 127.0.0.1, on a real
PostgreSQL (a database of this module's own, so no other test's subscriptions are delivered here).

No assertion is about how fast anything happened: delays are checked only as lower bounds (an
attempt never comes before its schedule allows), and waits end on what the database shows.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import socket
from collections.abc import Iterator
from datetime import UTC, datetime

import aiohttp
import asyncpg
import orjson
import pytest

from gateway.app.settings import Settings
from gateway.runtime.ports import free_port
from gateway.webhooks import targets
from gateway.webhooks.dispatcher import (
    USER_AGENT,
    DispatchConfig,
    Dispatcher,
    fixed_delays,
    judge,
    parse_retry_after,
)
from gateway.webhooks.dispatcher_actor import WebhookDispatcherActor, dispatch_config
from gateway.webhooks.rules import delivery_body, new_secret, verify
from gateway.webhooks.store import jobs as delivery_jobs
from gateway.webhooks.store import subscriptions as webhooks
from gateway.webhooks.store.jobs import ClaimRules, Outcome, Result
from gateway.webhooks.validation import url_problem
from tests.webhooks.support import (
    FAST,
    Answer,
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
    port_of,
    settled,
    subscribe,
)

# -- the pure parts ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "result"),
    [
        (200, Result.DELIVERED),
        (204, Result.DELIVERED),
        (500, Result.RETRY),
        (503, Result.RETRY),
        (429, Result.RETRY),
        (408, Result.RETRY),
        (301, Result.DEAD),
        (302, Result.DEAD),
        (400, Result.DEAD),
        (404, Result.DEAD),
        (410, Result.DEAD),
    ],
)
def test_what_an_answer_means(status: int, result: Result) -> None:
    assert judge(status).result is result


def test_retry_after_as_seconds_or_a_date() -> None:
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after(None) is None and parse_retry_after("soon") is None
    assert parse_retry_after("9" * 5000) is None and parse_retry_after("١٢٣") is None  # a receiver's nonsense
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC).timestamp()
    assert parse_retry_after("Thu, 01 Jan 2026 12:00:30 GMT", now) == 30.0
    assert parse_retry_after("Thu, 01 Jan 2026 11:00:00 GMT", now) == 0.0
    assert judge(429, "12").retry_after_s == 12.0 and judge(503, "12").retry_after_s == 12.0
    assert judge(500, "12").retry_after_s is None


def test_fixed_delays_give_up_after_the_schedule_and_honour_retry_after() -> None:
    retry = fixed_delays([1, 2], max_retry_after_s=60)
    assert [retry(1, None), retry(2, None), retry(3, None)] == [1.0, 2.0, None]
    assert retry(1, 30.0) == 30.0 and retry(1, 600.0) == 60.0


def test_a_dispatcher_holds_no_more_jobs_than_its_lease_covers() -> None:
    assert DispatchConfig(concurrency=64, timeout_s=10, lease_s=60).in_hand == 5 * 64  # 5 s margin
    assert DispatchConfig(concurrency=64, timeout_s=5, lease_s=60).in_hand == 5 * 64  # at most five rounds
    assert DispatchConfig(concurrency=64, timeout_s=10, lease_s=30).in_hand == 2 * 64
    assert DispatchConfig(concurrency=64, timeout_s=10, lease_s=20).in_hand == 64  # no queue


def test_a_lease_shorter_than_two_attempts_is_refused() -> None:
    with pytest.raises(ValueError, match="lease_s"):
        DispatchConfig(timeout_s=10, lease_s=15)
    with pytest.raises(ValueError, match="webhook_lease_s"):
        Settings(webhook_delivery_timeout_s=30, webhook_lease_s=45)


def test_the_fairness_settings_reach_the_dispatcher_and_bad_ones_are_refused() -> None:
    config = dispatch_config(Settings(webhook_per_account=5, webhook_pause_after_dead=3))
    assert (config.per_account, config.pause_after_dead) == (5, 3)
    assert dispatch_config(Settings()).per_account == 16 and dispatch_config(Settings()).pause_after_dead == 10
    with pytest.raises(ValueError, match="per_account"):
        DispatchConfig(per_account=0)
    with pytest.raises(ValueError, match="pause_after_dead"):
        DispatchConfig(pause_after_dead=-1)
    for bad in ({"webhook_per_account": 0}, {"webhook_watched_addresses_per_account": 5_001}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            Settings(**bad)


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("https://127.0.0.1:8443/", "loopback"),
        ("https://127.1/", "loopback"),
        ("https://10.1.2.3/", "private"),
        ("https://169.254.169.254/latest/meta-data/", "metadata"),
        ("https://[::1]/", "loopback"),
        ("https://[::ffff:127.0.0.1]/", "loopback"),
        ("http://hooks.example.com/", "https://"),
        ("ftp://hooks.example.com/", "https://"),
    ],
)
def test_url_refusals(url: str, why: str) -> None:
    """The dispatcher checks each job's URL again with the creation check (DNS is checked at connect)."""
    refusal = url_problem(url, allow_private=False)
    assert refusal is not None and why in refusal
    assert url_problem(url.replace("ftp://", "http://"), allow_private=True) is None


def test_public_targets_pass_the_url_check() -> None:
    assert url_problem("https://hooks.example.com/x", allow_private=False) is None
    assert url_problem("https://8.8.8.8/x", allow_private=False) is None


class FixedResolver(aiohttp.abc.AbstractResolver):
    def __init__(self, *addresses: str) -> None:
        self.addresses = addresses

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[aiohttp.abc.ResolveResult]:
        return [
            {"hostname": host, "host": a, "port": port, "family": socket.AF_INET, "proto": 0, "flags": 0}
            for a in self.addresses
        ]

    async def close(self) -> None:
        pass


async def test_a_name_with_any_forbidden_address_is_refused_at_resolution() -> None:
    resolver = targets.GuardedResolver(FixedResolver("93.184.216.34", "10.0.0.7"))
    with pytest.raises(targets.RefusedTarget, match=r"hooks\.example resolves to 10\.0\.0\.7 is a private"):
        await resolver.resolve("hooks.example", 443)
    public = targets.GuardedResolver(FixedResolver("93.184.216.34"))
    assert [r["host"] for r in await public.resolve("hooks.example", 443)] == ["93.184.216.34"]


async def test_the_connector_refuses_the_address_it_would_connect_to(receiver: Receiver) -> None:
    """The socket factory sees every connection's address, IP literals included (they skip the
    resolver): a loopback receiver is never reached, whatever the URL check said."""
    port = port_of(receiver.url)
    async with aiohttp.ClientSession(connector=targets.connector(4, allow_private=False)) as http:
        for url in (f"http://127.0.0.1:{port}/hook", f"http://localhost:{port}/hook"):
            with pytest.raises(aiohttp.ClientConnectorError) as refused:
                await http.post(url, data=b"{}")
            reason = targets.refusal_of(refused.value)
            assert reason is not None and "loopback" in reason, refused.value
    assert receiver.received == []


# -- delivery --------------------------------------------------------------------------------------


async def test_each_delivery_is_signed_with_the_current_secret(pool: asyncpg.Pool, receiver: Receiver) -> None:
    hook = await subscribe(pool, receiver.url)
    first = await enqueue(pool, hook, {"signature": "abc", "credits_added": 5})
    async with dispatching(pool):
        await eventually(settled(pool, first), "the first delivery")
        old_secret, new = hook.secret, new_secret()
        assert await webhooks.rotate_secret(pool, hook.pubkey, hook.id, new)
        second = await enqueue(pool, hook)
        await eventually(settled(pool, second), "the delivery after the rotation")

    one, two = receiver.received
    row = await job(pool, first)
    assert (row["status"], row["attempts"], row["last_status"], row["response_excerpt"]) == ("delivered", 1, 200, "ok")
    assert row["delivered_at"] is not None and row["locked_by"] is None
    assert one.event_id == f"evt_{hook.id}_{first}" and one.webhook_id == hook.id
    assert one.body == delivery_body(
        hook.id, first, "deposit.credited", orjson.loads(row["payload"]), row["created_at"]
    )
    assert orjson.loads(one.body)["data"] == {"signature": "abc", "credits_added": 5}
    assert one.headers["Content-Type"] == "application/json" and one.headers["User-Agent"] == USER_AGENT
    assert verify(old_secret, one.event_id, one.timestamp, one.body, one.signature)

    assert two.event_id == f"evt_{hook.id}_{second}"
    assert verify(new, two.event_id, two.timestamp, two.body, two.signature)
    assert not verify(old_secret, two.event_id, two.timestamp, two.body, two.signature)


async def test_a_failing_receiver_gets_the_same_event_again_later_each_time(
    pool: asyncpg.Pool, receiver: Receiver
) -> None:
    hook = await subscribe(pool, receiver.url)
    job_id = await enqueue(pool, hook)
    receiver.script[f"evt_{hook.id}_{job_id}"] = [Answer(500, "down"), Answer(502, "still down")]
    delays = [0.3, 0.9]
    async with dispatching(pool, retry=fixed_delays(delays)):
        await eventually(settled(pool, job_id), "the delivery")

    row = await job(pool, job_id)
    assert (row["status"], row["attempts"], row["last_status"]) == ("delivered", 3, 200)
    attempts = receiver.received
    assert len(attempts) == 3
    assert {a.event_id for a in attempts} == {f"evt_{hook.id}_{job_id}"}
    assert len({a.body for a in attempts}) == 1  # the same bytes every time
    assert all(verify(hook.secret, a.event_id, a.timestamp, a.body, a.signature) for a in attempts)
    gaps = [b.at - a.at for a, b in itertools.pairwise(attempts)]
    assert gaps[0] >= delays[0] and gaps[1] >= delays[1], gaps  # never before the schedule allows


async def test_retry_after_is_honoured(pool: asyncpg.Pool, receiver: Receiver) -> None:
    hook = await subscribe(pool, receiver.url)
    job_id = await enqueue(pool, hook)
    receiver.script[f"evt_{hook.id}_{job_id}"] = [Answer(429, "slow down", {"Retry-After": "2"})]
    async with dispatching(pool):  # its own delays are 50 ms
        await eventually(settled(pool, job_id), "the delivery")
    first, second = receiver.received
    assert second.at - first.at >= 2.0
    assert (await job(pool, job_id))["attempts"] == 2


async def test_final_answers_and_exhausted_retries_make_a_job_dead(pool: asyncpg.Pool, receiver: Receiver) -> None:
    hook = await subscribe(pool, receiver.url)
    gone, moved, broken = [await enqueue(pool, hook) for _ in range(3)]
    elsewhere = receiver.url.replace("/hook", "/elsewhere")
    receiver.script[f"evt_{hook.id}_{gone}"] = [Answer(404, "no such hook")]
    receiver.script[f"evt_{hook.id}_{moved}"] = [Answer(307, "", {"Location": elsewhere})]
    receiver.script[f"evt_{hook.id}_{broken}"] = [Answer(500, "x")] * 10
    async with dispatching(pool, retry=fixed_delays([0.05, 0.05])):
        await eventually(settled(pool, gone, moved, broken), "three dead jobs")

    rows = {i: await job(pool, i) for i in (gone, moved, broken)}
    assert (rows[gone]["status"], rows[gone]["attempts"], rows[gone]["last_status"]) == ("dead", 1, 404)
    assert rows[gone]["response_excerpt"] == "no such hook"
    assert (rows[moved]["status"], rows[moved]["attempts"]) == ("dead", 1)
    assert "redirects are not followed" in rows[moved]["last_error"] and receiver.redirected == 0
    assert (rows[broken]["status"], rows[broken]["attempts"]) == ("dead", 3)
    assert "gave up after 3 attempts" in rows[broken]["last_error"]


async def test_a_receiver_that_does_not_answer_in_time_is_retried(pool: asyncpg.Pool, receiver: Receiver) -> None:
    hook = await subscribe(pool, receiver.url)
    job_id = await enqueue(pool, hook)
    receiver.script[f"evt_{hook.id}_{job_id}"] = [Answer(200, "too late", wait_s=3.0)]
    config = DispatchConfig(concurrency=4, per_webhook=4, timeout_s=0.5, lease_s=5, allow_private=True, poll_s=0.05)
    async with dispatching(pool, config):
        await eventually(settled(pool, job_id), "the delivery")
    row = await job(pool, job_id)
    assert (row["status"], row["attempts"]) == ("delivered", 2)
    assert len(receiver.received) == 2


async def test_only_a_bounded_excerpt_of_the_answer_is_kept(pool: asyncpg.Pool, receiver: Receiver) -> None:
    hook = await subscribe(pool, receiver.url)
    job_id = await enqueue(pool, hook)
    receiver.script[f"evt_{hook.id}_{job_id}"] = [Answer(200, "é\x00" + "x" * 100_000)]
    async with dispatching(pool):
        await eventually(settled(pool, job_id), "the delivery")
    excerpt = (await job(pool, job_id))["response_excerpt"]
    assert excerpt.startswith("é\ufffd") and len(excerpt.encode()) <= 512 + 3


# -- a slow receiver, many dispatchers, a dead one -------------------------------------------------


async def test_a_slow_subscription_takes_at_most_its_share_of_slots(pool: asyncpg.Pool, receiver: Receiver) -> None:
    slow, fast = await subscribe(pool, receiver.url), await subscribe(pool, receiver.url)
    receiver.hold[slow.id] = asyncio.Event()
    slow_jobs = [await enqueue(pool, slow) for _ in range(10)]
    fast_jobs = [await enqueue(pool, fast) for _ in range(10)]
    config = DispatchConfig(concurrency=6, per_webhook=3, timeout_s=5, lease_s=30, allow_private=True, poll_s=0.05)
    async with dispatching(pool, config, name="a"), dispatching(pool, config, name="b"):
        await eventually(settled(pool, *fast_jobs), "the fast subscription's deliveries, the slow one stuck")
        await eventually(lambda: is_true(receiver.in_flight[slow.id] == 3), "the slow subscription's share out")
        assert receiver.most_in_flight[slow.id] == 3  # over both dispatchers, never more
        receiver.hold[slow.id].set()
        await eventually(settled(pool, *slow_jobs), "the slow subscription's deliveries")
    assert receiver.most_in_flight[slow.id] == 3 and receiver.most_in_flight[fast.id] <= 3
    assert sum(receiver.events().values()) == 20


async def test_a_written_outcome_frees_its_slot_for_the_next_claim(pool: asyncpg.Pool, receiver: Receiver) -> None:
    """A job holds its subscription's slot until its outcome is written, so the claim made when the
    worker finished finds the subscription full; the write itself must wake the claim loop, not its
    next poll (an hour here)."""
    hook = await subscribe(pool, receiver.url)
    ids = [await enqueue(pool, hook) for _ in range(3)]
    config = DispatchConfig(concurrency=2, per_webhook=1, timeout_s=5, lease_s=30, allow_private=True, poll_s=3600)
    async with dispatching(pool, config) as dispatcher:
        await eventually(settled(pool, *ids), "three deliveries one after another", timeout_s=20)
    assert dispatcher.stats.delivered == 3 and receiver.most_in_flight[hook.id] == 1


async def test_a_finished_attempt_holds_no_slot_while_its_outcome_waits(pool: asyncpg.Pool, receiver: Receiver) -> None:
    hook = await subscribe(pool, receiver.url)
    first, second = await enqueue(pool, hook), await enqueue(pool, hook)
    [claimed] = await delivery_jobs.claim(pool, "w", 10, ClaimRules(30, 1))
    assert claimed.id == first
    assert await delivery_jobs.claim(pool, "w", 10, ClaimRules(30, 1)) == []  # its one slot is out
    assert await delivery_jobs.claim(pool, "v", 10, ClaimRules(30, 1), finished=[(first, 1)]) == []  # not v's claim
    assert await delivery_jobs.claim(pool, "w", 10, ClaimRules(30, 1), finished=[(first, 0)]) == []  # not this claim
    [after] = await delivery_jobs.claim(pool, "w", 10, ClaimRules(30, 1), finished=[(first, 1)])
    assert after.id == second
    assert await delivery_jobs.record(pool, "w", [Outcome(first, 1, Result.DELIVERED, http_status=200)]) == {first}


async def test_two_dispatchers_never_deliver_one_job_twice(pool: asyncpg.Pool, receiver: Receiver) -> None:
    hooks = [await subscribe(pool, receiver.url) for _ in range(4)]
    ids = [await enqueue(pool, hooks[n % 4]) for n in range(300)]
    receiver.default = Answer(200, "ok", wait_s=0.005)
    config = DispatchConfig(concurrency=8, per_webhook=16, timeout_s=5, lease_s=30, allow_private=True, poll_s=0.02)
    async with dispatching(pool, config, name="a") as a, dispatching(pool, config, name="b") as b:
        await eventually(settled(pool, *ids), "every delivery")
    counts = receiver.events()
    assert len(counts) == 300 and set(counts.values()) == {1}
    assert a.stats.delivered > 0 and b.stats.delivered > 0
    assert a.stats.delivered + b.stats.delivered == 300
    assert await pool.fetchval("SELECT max(attempts) FROM delivery_jobs WHERE id = ANY($1::bigint[])", ids) == 1


async def test_a_killed_dispatcher_loses_nothing(pool: asyncpg.Pool, receiver: Receiver) -> None:
    """The first dispatcher is cancelled while the receiver holds its deliveries (as a crash would
    leave them); the second takes over once their lease passes. Every job ends delivered, and only
    jobs the first one held at its death may have reached the receiver twice."""
    hooks = [await subscribe(pool, receiver.url) for _ in range(2)]
    ids = [await enqueue(pool, hooks[n % 2]) for n in range(60)]
    for hook in hooks:
        receiver.hold[hook.id] = asyncio.Event()
    config = DispatchConfig(concurrency=8, per_webhook=8, timeout_s=1, lease_s=2, allow_private=True, poll_s=0.05)
    first = Dispatcher(pool, "first", config, retry=FAST)
    running = asyncio.create_task(first.run(asyncio.Event()))
    await eventually(lambda: is_true(len(receiver.received) == 8), "the first dispatcher's deliveries out")
    running.cancel()
    await asyncio.gather(running, return_exceptions=True)
    held = {
        r["id"]
        for r in await pool.fetch("SELECT id FROM delivery_jobs WHERE status = 'delivering' AND locked_by = 'first'")
    }
    out = {int(r.event_id.rsplit("_", 1)[1]) for r in receiver.received}
    assert len(out) == 8 and out <= held  # the ones at the receiver, and any it had queued
    for hook in hooks:
        receiver.hold[hook.id].set()

    async with dispatching(pool, config, name="second"):
        await eventually(settled(pool, *ids), "every delivery")
    rows = await pool.fetch("SELECT id, status FROM delivery_jobs WHERE id = ANY($1::bigint[])", ids)
    assert {r["status"] for r in rows} == {"delivered"}
    counts = receiver.events()
    assert {f"evt_{hooks[n % 2].id}_{i}" for n, i in enumerate(ids)} == set(counts)
    twice = {int(e.rsplit("_", 1)[1]) for e, n in counts.items() if n > 1}
    assert twice <= held and max(counts.values()) <= 2


async def test_a_stopping_dispatcher_gives_back_what_it_did_not_start(pool: asyncpg.Pool, receiver: Receiver) -> None:
    hook = await subscribe(pool, receiver.url)
    ids = [await enqueue(pool, hook) for _ in range(10)]
    receiver.hold[hook.id] = asyncio.Event()
    config = DispatchConfig(
        concurrency=2, per_webhook=8, timeout_s=5, lease_s=20, allow_private=True, poll_s=0.05, drain_s=0.2
    )
    assert config.in_hand == 6  # two attempts under way, four queued
    async with dispatching(pool, config, name="stopping") as dispatcher:
        await eventually(lambda: is_true(len(receiver.received) == 2), "two deliveries out")
        await eventually(lambda: is_true(dispatcher.stats.claimed == 6), "four more jobs queued")
    rows = await pool.fetch("SELECT status, attempts, locked_by FROM delivery_jobs WHERE id = ANY($1::bigint[])", ids)
    out = [r for r in rows if r["status"] == "delivering"]
    assert len(out) == 2 and {r["locked_by"] for r in out} == {dispatcher.id}  # cut off: left to their lease
    assert sorted((r["status"], r["attempts"]) for r in rows if r not in out) == [("pending", 0)] * 8


async def test_a_lost_claim_cannot_overwrite_the_next_one(pool: asyncpg.Pool, receiver: Receiver) -> None:
    hook = await subscribe(pool, receiver.url)
    job_id = await enqueue(pool, hook)
    (mine,) = await delivery_jobs.claim(pool, "a", 10, ClaimRules(30, 10))
    await pool.execute("UPDATE delivery_jobs SET locked_until = now() - interval '1 second' WHERE id = $1", job_id)
    (theirs,) = await delivery_jobs.claim(pool, "b", 10, ClaimRules(30, 10))
    assert (mine.id, mine.attempts, theirs.id, theirs.attempts) == (job_id, 1, job_id, 2)
    assert not await delivery_jobs.dead(pool, "a", job_id, mine.attempts, "late")
    assert not await delivery_jobs.delivered(pool, "b", job_id, mine.attempts, 200)  # b's token is attempts 2
    row = await job(pool, job_id)
    assert (row["status"], row["locked_by"], row["last_error"]) == ("delivering", "b", None)
    assert await delivery_jobs.retry_later(pool, "b", job_id, theirs.attempts, 0, "HTTP 500", 500)
    row = await job(pool, job_id)
    assert (row["status"], row["locked_by"], row["last_status"]) == ("pending", None, 500)


async def test_a_dispatcher_that_loses_its_connections_takes_new_ones(pool: asyncpg.Pool, receiver: Receiver) -> None:
    hook = await subscribe(pool, receiver.url)
    first = await enqueue(pool, hook)
    async with dispatching(pool):
        await eventually(settled(pool, first), "the first delivery")
        await pool.execute(
            """SELECT pg_terminate_backend(pid) FROM pg_stat_activity
               WHERE datname = current_database() AND pid <> pg_backend_pid()"""
        )
        second = await enqueue(pool, hook)
        await eventually(settled(pool, second), "a delivery after the database dropped every connection")
    assert (await job(pool, second))["status"] == "delivered"


@pytest.fixture
def process_gc() -> Iterator[None]:
    """The actor tunes its process's collector (its own in Ray); this process's is put back after."""
    thresholds = gc.get_threshold()
    gc.set_threshold(700, 10, 10)  # Python's own, and nothing frozen: what the actor sets shows
    gc.unfreeze()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


async def test_the_actor_class_delivers_and_stops(
    pool: asyncpg.Pool, receiver: Receiver, delivery_dsn: str, process_gc: None
) -> None:
    hook = await subscribe(pool, receiver.url)
    ids = [await enqueue(pool, hook) for _ in range(5)]
    settings = Settings(database_url=delivery_dsn, webhook_allow_private=True).model_dump(mode="json")
    actor = WebhookDispatcherActor(settings, "webhook-dispatcher-test", retry_delays=[0.05])
    try:
        await eventually(settled(pool, *ids), "the actor's deliveries")
        status = actor.status()
        assert status["running"] and status["delivered"] == 5
        # set up, its process collects young objects every gc_young_threshold and never walks start-up's
        assert gc.get_threshold()[0] == Settings().gc_young_threshold
        assert gc.get_freeze_count() > 0
    finally:
        await asyncio.to_thread(actor.shutdown)
    assert not actor.status()["running"]
    assert len(receiver.events()) == 5


# -- refused targets ---------------------------------------------------------------------------------


async def test_private_targets_are_refused_and_the_reason_recorded(pool: asyncpg.Pool, receiver: Receiver) -> None:
    port = port_of(receiver.url)
    refused = {  # the creation check, made again before each attempt (a name's addresses at connect)
        f"https://127.0.0.1:{port}/hook": "'127.0.0.1' is a loopback address",
        "https://10.1.2.3/hook": "'10.1.2.3' is a private address",
        "https://169.254.169.254/latest/meta-data/": "'169.254.169.254' is a cloud metadata address",
        f"https://[::1]:{port}/hook": "'::1' is a loopback address",
        f"https://[::ffff:127.0.0.1]:{port}/hook": "'::ffff:127.0.0.1' is a loopback address",
        f"https://localhost:{port}/hook": "'localhost' is a loopback name",
        f"http://127.0.0.1:{port}/hook": "url must start with https://",
        "http://hooks.example.com/": "url must start with https://",
    }
    owner = await account(pool)
    ids = {url: await enqueue(pool, await subscribe(pool, url, owner)) for url in refused}
    config = DispatchConfig(concurrency=16, per_webhook=4, timeout_s=2, lease_s=10, allow_private=False, poll_s=0.05)
    async with dispatching(pool, config):
        await eventually(settled(pool, *ids.values()), "every refusal")
    for url, why in refused.items():
        row = await job(pool, ids[url])
        assert (row["status"], row["attempts"]) == ("dead", 1), url
        assert row["last_error"].startswith("refused: ") and why in row["last_error"], (url, row["last_error"])
    assert receiver.received == []


# -- billing of paid deliveries --------------------------------------------------------------------


async def test_a_priced_delivery_is_charged_once_however_many_attempts(pool: asyncpg.Pool, receiver: Receiver) -> None:
    pubkey = await account(pool, 100_000)  # 10,000 credits
    hook = await subscribe(pool, receiver.url, pubkey, signal=True)
    job_id = await enqueue(pool, hook, {"kind": "newPair", "slot": 7}, price=5)
    receiver.script[f"evt_{hook.id}_{job_id}"] = [Answer(503, "busy"), Answer(500, "busy")]
    async with dispatching(pool):
        await eventually(settled(pool, job_id), "the delivery")
    row = await job(pool, job_id)
    assert (row["status"], row["attempts"], row["charged"]) == ("delivered", 3, 5)
    assert await pool.fetchval("SELECT balance FROM accounts WHERE pubkey = $1", pubkey) == 10_000 - 5
    assert (await ledger(pool, pubkey))[1:] == [("debit", -5, f"delivery:{job_id}")]
    assert await conserved(pool, pubkey)
    assert orjson.loads(receiver.received[-1].body) == {"kind": "newPair", "slot": 7}  # a signal is its own body


async def test_a_paid_delivery_the_receiver_answered_stays_charged(pool: asyncpg.Pool, receiver: Receiver) -> None:
    """Any HTTP answer means the event reached the receiver: a 410 (dead at once) and a 500 on every
    attempt (dead once the schedule gives up) were received, and their charges stay."""
    pubkey = await account(pool, 100_000)
    hook = await subscribe(pool, receiver.url, pubkey, signal=True)
    refused, failing = await enqueue(pool, hook, price=5), await enqueue(pool, hook, price=5)
    receiver.script[f"evt_{hook.id}_{refused}"] = [Answer(410, "gone")]
    receiver.script[f"evt_{hook.id}_{failing}"] = [Answer(500, "down")] * 3
    async with dispatching(pool, retry=fixed_delays([0.05, 0.05])):
        await eventually(settled(pool, refused, failing), "two dead deliveries")
    charges = sorted((await ledger(pool, pubkey))[1:], key=lambda e: str(e[2]))
    assert charges == sorted([("debit", -5, f"delivery:{refused}"), ("debit", -5, f"delivery:{failing}")], key=str)
    assert await balance(pool, pubkey) == 10_000 - 10 and await conserved(pool, pubkey)
    for job_id, status in ((refused, 410), (failing, 500)):
        row = await job(pool, job_id)
        assert (row["status"], row["charged"], row["answered"], row["last_status"]) == ("dead", 5, True, status)


async def test_a_paid_delivery_that_never_reached_the_receiver_is_refunded(
    pool: asyncpg.Pool, receiver: Receiver
) -> None:
    """Nothing listening (connection refused every time): dead, never sent, so never received: the
    charge comes back as a refund with its ref. A receiver that takes the request and never answers in
    time got it: dead unanswered, and charged (docs/api.md, Billing of deliveries)."""
    pubkey = await account(pool, 100_000)
    nowhere = await subscribe(pool, f"http://127.0.0.1:{free_port()}/hook", pubkey, signal=True)
    silent = await subscribe(pool, receiver.url, pubkey, signal=True)
    unreachable, unanswered = await enqueue(pool, nowhere, price=5), await enqueue(pool, silent, price=5)
    receiver.script[f"evt_{silent.id}_{unanswered}"] = [Answer(200, "too late", wait_s=3.0)] * 2
    config = DispatchConfig(concurrency=4, per_webhook=4, timeout_s=0.5, lease_s=5, allow_private=True, poll_s=0.05)
    async with dispatching(pool, config, retry=fixed_delays([0.05])):
        await eventually(settled(pool, unreachable, unanswered), "two dead deliveries")
    for job_id, charged in ((unreachable, 0), (unanswered, 5)):
        row = await job(pool, job_id)
        assert (row["status"], row["attempts"], row["charged"], row["answered"]) == ("dead", 2, charged, False)
    ref = f"delivery:{unreachable}"
    assert [e for e in await ledger(pool, pubkey) if e[2] == ref] == [("debit", -5, ref), ("refund", 5, ref)]
    ref = f"delivery:{unanswered}"
    assert [e for e in await ledger(pool, pubkey) if e[2] == ref] == [("debit", -5, ref)]
    assert await balance(pool, pubkey) == 10_000 - 5 and await conserved(pool, pubkey)


async def test_a_charge_that_crosses_the_low_balance_line_emits_low_balance(
    pool: asyncpg.Pool, receiver: Receiver
) -> None:
    pubkey = await account(pool, 10_000)  # 1,000 credits: the line
    watching = webhooks.NewWebhook(receiver.url, "lifecycle", lifecycle_events=("low_balance",))
    lifecycle = await webhooks.create(pool, pubkey, watching, new_secret(), max_per_account=1_000)
    assert isinstance(lifecycle, webhooks.Webhook)
    signals = await subscribe(pool, receiver.url, pubkey, signal=True)
    job_id = await enqueue(pool, signals, price=5)
    async with dispatching(pool):
        await eventually(settled(pool, job_id), "the signal delivery")
        low = await pool.fetchval("SELECT id FROM delivery_jobs WHERE webhook_id = $1", lifecycle.id)
        assert low is not None
        await eventually(settled(pool, low), "the low_balance delivery")
    (event,) = [orjson.loads(r.body) for r in receiver.received if r.webhook_id == lifecycle.id]
    assert (event["type"], event["data"]) == ("low_balance", {"balance": 995, "threshold": 1000})


async def test_an_account_that_cannot_pay_pauses_its_subscription(pool: asyncpg.Pool, receiver: Receiver) -> None:
    """1,000 credits, 998 of them held by a replica's live lease: 2 available, a delivery costs 5."""
    pubkey = await account(pool, 10_000)
    await pool.execute(
        """INSERT INTO credit_leases (pubkey, replica_id, granted, expires_at)
           VALUES ($1, 'r', 998, now() + interval '1 hour')""",
        pubkey,
    )
    hook = await subscribe(pool, receiver.url, pubkey, signal=True)
    job_id = await enqueue(pool, hook, price=5)

    async def paused() -> bool:
        return bool(await pool.fetchval("SELECT status = 'paused' FROM webhooks WHERE id = $1", hook.id))

    async with dispatching(pool) as dispatcher:
        await eventually(paused, "the subscription paused")
        await eventually(lambda: is_true(dispatcher.in_flight == 0), "the claim let go")
    hook_row = await pool.fetchrow("SELECT paused_reason FROM webhooks WHERE id = $1", hook.id)
    assert hook_row["paused_reason"] == "insufficient credits: a delivery costs 5, 2 available"
    row = await job(pool, job_id)
    assert (row["status"], row["attempts"], row["charged"], row["locked_by"]) == ("pending", 0, 0, None)
    assert receiver.received == [] and dispatcher.stats.unpaid == 1
    assert await pool.fetchval("SELECT balance FROM accounts WHERE pubkey = $1", pubkey) == 1_000
    assert await conserved(pool, pubkey)

    await pool.execute("UPDATE credit_leases SET released = true WHERE pubkey = $1", pubkey)
    assert await webhooks.resume(pool, pubkey, hook.id)
    async with dispatching(pool):
        await eventually(settled(pool, job_id), "the delivery once resumed")
    assert (await job(pool, job_id))["charged"] == 5 and len(receiver.received) == 1


async def test_outcomes_of_many_jobs_are_written_together(pool: asyncpg.Pool, receiver: Receiver) -> None:
    hook = await subscribe(pool, receiver.url)
    ids = [await enqueue(pool, hook) for _ in range(3)]
    jobs = await delivery_jobs.claim(pool, "w", 10, ClaimRules(30, 10))
    outcomes = [
        Outcome(jobs[0].id, 1, Result.DELIVERED, http_status=204),
        Outcome(jobs[1].id, 1, Result.RETRY, http_status=503, error="HTTP 503", delay_s=3600),
        Outcome(jobs[2].id, 1, Result.DEAD, http_status=404, error="HTTP 404"),
    ]
    assert await delivery_jobs.record(pool, "w", outcomes) == set(ids)
    rows = [await job(pool, i) for i in ids]
    assert [r["status"] for r in rows] == ["delivered", "pending", "dead"]
    assert rows[1]["next_attempt_at"] > rows[0]["delivered_at"]
    assert await delivery_jobs.claim(pool, "w", 10, ClaimRules(30, 10)) == []  # the retry is not due for an hour
