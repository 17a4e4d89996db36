"""The replica-local meter on real PostgreSQL: two replicas, crashes, refunds, the local fast path."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest

from gateway.core.credits import SettleResult
from gateway.credits.meter import READ_TRIES, Admission, Meter, Outcome
from gateway.storage import ledger, sends
from gateway.storage.ledger import balance, check_conservation
from tests.credits.helpers import fund, new_pubkey, new_signature

MeterFactory = Callable[..., Meter]


@pytest.fixture
async def make_meter(pool: asyncpg.Pool) -> AsyncIterator[MeterFactory]:
    """Meters stopped (flushed, leases released) at the end of the test unless the test killed them."""
    made: list[Meter] = []

    def make(**options: object) -> Meter:
        meter = Meter(pool, **options)  # type: ignore[arg-type]
        made.append(meter)
        return meter

    yield make
    for meter in made:
        await meter.stop()


async def count_ledger(db: asyncpg.Connection, pubkey: str, kind: str) -> int:
    return int(await db.fetchval("SELECT count(*) FROM ledger_entries WHERE pubkey = $1 AND type = $2", pubkey, kind))


async def test_unknown_account_and_short_balance(make_meter: MeterFactory, pool: asyncpg.Pool) -> None:
    meter = make_meter(clock=lambda: 100.0)  # time stands still: the negative cache never lapses by itself
    pubkey = new_pubkey()
    assert (await meter.admit(pubkey, 1)).outcome is Outcome.NO_ACCOUNT
    assert meter.remaining(pubkey) is None
    await fund(pool, pubkey, 3)
    assert (await meter.admit(pubkey, 1)).outcome is Outcome.NO_ACCOUNT  # cached for negative_ttl_s
    meter.invalidate(pubkey)
    assert (await meter.admit(pubkey, 25)).outcome is Outcome.INSUFFICIENT
    admitted = await meter.admit(pubkey, 1)
    assert admitted.ok and meter.remaining(pubkey) == 2


async def test_fast_path_spends_locally(
    make_meter: MeterFactory, pool: asyncpg.Pool, db: asyncpg.Connection, pubkey: str
) -> None:
    await fund(pool, pubkey, 1_000)
    meter = make_meter()
    first = await meter.admit(pubkey, 1)
    leases = int(await db.fetchval("SELECT count(*) FROM credit_leases WHERE pubkey = $1", pubkey))
    for n in range(19):  # the first lease is 20 × the price: no database trip for these
        admission = await meter.admit(pubkey, 1)
        assert admission.ok
        meter.complete(admission, "getSlot", f"r{n}")
    meter.complete(first, "getSlot", "r")
    assert int(await db.fetchval("SELECT count(*) FROM credit_leases WHERE pubkey = $1", pubkey)) == leases == 1
    assert await balance(pool, pubkey) == 1_000  # nothing flushed yet
    assert meter.remaining(pubkey) == 980
    await meter.flush()
    assert await balance(pool, pubkey) == 980
    assert await count_ledger(db, pubkey, "debit") == 1  # aggregated per method
    assert int(await db.fetchval("SELECT count(*) FROM usage_history WHERE pubkey = $1", pubkey)) == 20
    assert (await check_conservation(db, pubkey)).ok


async def test_next_lease_is_taken_before_the_active_one_runs_out(
    make_meter: MeterFactory, pool: asyncpg.Pool, db: asyncpg.Connection, pubkey: str
) -> None:
    """Past half of a lease the next one is leased in the background, so no call waits for the store."""
    await fund(pool, pubkey, 1_000)
    meter = make_meter()
    first = await meter.admit(pubkey, 1)  # the first lease: 20 credits
    admissions = [first]
    for _ in range(10):  # 11 of 20 spent: under half left, the next lease is being taken
        admission = meter.spend_local(pubkey, 1)
        assert admission is not None
        admissions.append(admission)
    for _ in range(100):
        await asyncio.sleep(0.01)
        if first.lease is not None and first.lease.closing:
            break
    assert first.lease is not None and first.lease.closing, "the next lease did not arrive"
    for _ in range(15):  # more than the first lease had left: all local, none awaited the store
        admission = meter.spend_local(pubkey, 1)
        assert admission is not None and admission.lease is not first.lease
        admissions.append(admission)
    for n, admission in enumerate(admissions):
        meter.complete(admission, "getSlot", f"r{n}")
    await meter.stop()
    assert await balance(pool, pubkey) == 1_000 - len(admissions)
    assert int(await db.fetchval("SELECT count(*) FROM usage_history WHERE pubkey = $1", pubkey)) == len(admissions)
    live = await db.fetchval("SELECT count(*) FROM credit_leases WHERE pubkey = $1 AND NOT released", pubkey)
    assert live == 0 and (await check_conservation(db, pubkey)).ok


async def test_an_empty_account_is_not_asked_for_a_lease_per_call(
    make_meter: MeterFactory, pool: asyncpg.Pool, db: asyncpg.Connection, pubkey: str
) -> None:
    """With the whole balance leased, the background attempt finds nothing once, and is not repeated per call."""
    await fund(pool, pubkey, 20)
    meter = make_meter()
    admissions = [await meter.admit(pubkey, 1)]  # leases all 20
    admissions += [a for _ in range(14) if (a := meter.spend_local(pubkey, 1)) is not None]
    await meter.prefetched()
    leases = int(await db.fetchval("SELECT count(*) FROM credit_leases WHERE pubkey = $1", pubkey))
    admissions += [a for _ in range(5) if (a := meter.spend_local(pubkey, 1)) is not None]
    assert len(admissions) == 20 and meter.prefetching == 0
    assert int(await db.fetchval("SELECT count(*) FROM credit_leases WHERE pubkey = $1", pubkey)) == leases == 1
    for n, admission in enumerate(admissions):
        meter.complete(admission, "getSlot", f"r{n}")
    await meter.stop()
    assert await balance(pool, pubkey) == 0 and (await check_conservation(db, pubkey)).ok


async def test_a_busy_second_is_settled_in_chunks(
    make_meter: MeterFactory, pool: asyncpg.Pool, db: asyncpg.Connection, pubkey: str
) -> None:
    """Usage is settled at most ``flush_chunk`` records per transaction, and all of it is settled."""
    await fund(pool, pubkey, 1_000)
    meter = make_meter(flush_chunk=7)
    admissions = [await meter.admit(pubkey, 1)]
    admissions += [a for _ in range(14) if (a := meter.spend_local(pubkey, 1)) is not None]
    assert len(admissions) == 15
    for n, admission in enumerate(admissions):
        meter.complete(admission, "getSlot", f"r{n}")
    await meter.flush()
    assert await balance(pool, pubkey) == 985
    assert await count_ledger(db, pubkey, "debit") == 3  # 7 + 7 + 1
    await meter.stop()
    assert (await check_conservation(db, pubkey)).ok


async def test_refund_is_spendable_again(
    make_meter: MeterFactory, pool: asyncpg.Pool, db: asyncpg.Connection, pubkey: str
) -> None:
    await fund(pool, pubkey, 25)
    meter = make_meter()
    admission = await meter.admit(pubkey, 25)
    assert admission.ok and meter.remaining(pubkey) == 0
    meter.complete(admission, "getBlock", "r1", refunded=True)
    assert meter.remaining(pubkey) == 25
    again = await meter.admit(pubkey, 25)  # the refill flushes the refund first
    assert again.ok
    meter.complete(again, "getBlock", "r2")
    await meter.stop()
    assert await balance(pool, pubkey) == 0
    rows = await db.fetch("SELECT type, amount FROM ledger_entries WHERE pubkey = $1 ORDER BY id", pubkey)
    assert [tuple(r) for r in rows] == [("deposit", 25), ("debit", -25), ("refund", 25), ("debit", -25)]
    assert (await check_conservation(db, pubkey)).ok


@pytest.mark.parametrize("refund_rate", [0.0, 0.2])
async def test_two_replicas_never_admit_more_than_the_balance(
    make_meter: MeterFactory, pool: asyncpg.Pool, db: asyncpg.Connection, pubkey: str, refund_rate: float
) -> None:
    """200 concurrent calls of price 1 on two replicas against exactly 57 credits.

    Without refunds at most 57 are admitted; refunded credits may be spent again, so with refunds
    at most 57 are charged."""
    n = 57
    await fund(pool, pubkey, n)
    replicas = [make_meter(replicas=2, flush_interval_s=0.02), make_meter(replicas=2, flush_interval_s=0.02)]
    for meter in replicas:
        meter.start()
    rng = random.Random(4)
    refunded = 0

    async def call(i: int) -> bool:
        nonlocal refunded
        meter = replicas[i % 2]
        admission = await meter.admit(pubkey, 1)
        if not admission.ok:
            assert admission.outcome is Outcome.INSUFFICIENT
            return False
        await asyncio.sleep(rng.random() / 100)
        refund = rng.random() < refund_rate
        refunded += refund
        meter.complete(admission, "getSlot", f"r{i}", refunded=refund)
        return True

    results = await asyncio.gather(*(call(i) for i in range(200)))
    admitted = sum(results)
    assert 0 < admitted - refunded <= n
    if refund_rate == 0:
        assert admitted <= n
    for meter in replicas:
        await meter.stop()
    final = await balance(pool, pubkey)
    assert final == n - (admitted - refunded) and final >= 0
    report = await check_conservation(db, pubkey)
    assert report.ok, report
    history = await db.fetchval("SELECT count(*) FROM usage_history WHERE pubkey = $1", pubkey)
    assert history == admitted
    live = await db.fetchval("SELECT count(*) FROM credit_leases WHERE pubkey = $1 AND NOT released", pubkey)
    assert live == 0


async def test_crashed_replica_loses_only_unflushed_usage(
    make_meter: MeterFactory, pool: asyncpg.Pool, db: asyncpg.Connection, pubkey: str
) -> None:
    await fund(pool, pubkey, 50)
    doomed = make_meter(lease_ttl_s=3.0, flush_interval_s=60.0)
    doomed.start()
    for i in range(10):
        admission = await doomed.admit(pubkey, 1)
        assert admission.ok
        doomed.complete(admission, "getSlot", f"lost{i}")
    in_flight = await doomed.admit(pubkey, 1)
    assert in_flight.ok
    doomed.kill()  # the replica dies: its loop is gone, nothing is flushed, its lease is never released
    doomed.accounts.clear()

    survivor = make_meter(lease_ttl_s=3.0, flush_interval_s=0.05)
    survivor.start()
    await fund(pool, pubkey, 7)  # a deposit while the dead replica's lease is still held
    spent = await spend(survivor, pubkey, 80)
    dead_hold = "SELECT count(*) FROM credit_leases WHERE pubkey = $1 AND replica_id = $2 AND expires_at > now()"
    assert await db.fetchval(dead_hold, pubkey, doomed.replica_id) == 1
    assert spent == 57 - 20  # the dead replica's lease (20) is still held ...
    loop = asyncio.get_running_loop()
    give_up = loop.time() + 15
    while spent < 57 and loop.time() < give_up:  # ... until it expires
        spent += await spend(survivor, pubkey, 5)
        await asyncio.sleep(0.05)
    assert spent == 57  # all of it, the dead replica's unflushed usage included, is spendable again
    assert await spend(survivor, pubkey, 5) == 0
    await survivor.stop()
    assert await balance(pool, pubkey) == 0
    report = await check_conservation(db, pubkey)
    assert report.ok and report.granted == 57 and report.consumed == 57, report
    assert await count_ledger(db, pubkey, "deposit") == 2
    lost = "SELECT count(*) FROM usage_history WHERE pubkey = $1 AND request_id LIKE 'lost%'"
    assert not await db.fetchval(lost, pubkey)


async def spend(meter: Meter, pubkey: str, calls: int) -> int:
    """Admit and complete up to ``calls`` calls of price 1; return how many were admitted."""
    admitted = 0
    for _ in range(calls):
        admission = await meter.admit(pubkey, 1)
        if admission.ok:
            admitted += 1
            meter.complete(admission, "getSlot", "kept")
    return admitted


async def test_lost_flush_answer_is_not_charged_twice(
    make_meter: MeterFactory, pool: asyncpg.Pool, db: asyncpg.Connection, pubkey: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    await fund(pool, pubkey, 100)
    meter = make_meter()
    for i in range(3):
        admission = await meter.admit(pubkey, 5)
        meter.complete(admission, "getTransaction", f"r{i}")
    real_settle = ledger.settle
    attempts = 0

    async def answer_lost_once(*args: Any, **kwargs: Any) -> SettleResult:
        nonlocal attempts
        attempts += 1
        result = await real_settle(*args, **kwargs)
        if attempts == 1:
            raise ConnectionResetError("the commit happened; its answer did not arrive")
        return result

    monkeypatch.setattr(ledger, "settle", answer_lost_once)
    await meter.flush()  # logged, kept for a retry
    await meter.flush()  # the same flush again, with the same sequence number
    assert attempts == 2
    assert await balance(pool, pubkey) == 85
    assert await db.fetchval("SELECT count(*) FROM usage_history WHERE pubkey = $1", pubkey) == 3
    assert (await check_conservation(db, pubkey)).ok


async def test_short_configured_expiry_runs_in_the_meter_loop(
    make_meter: MeterFactory, pool: asyncpg.Pool, db: asyncpg.Connection, pubkey: str
) -> None:
    await fund(pool, pubkey, 30, expiry_s=1)
    meter = make_meter(flush_interval_s=0.05, expiry_interval_s=0.1, idle_release_s=0.2)
    meter.start()
    admission = await meter.admit(pubkey, 5)
    meter.complete(admission, "getTransaction", "r")
    for _ in range(100):  # the idle lease is released after idle_release_s, then the rest expires
        if await balance(pool, pubkey) == 0:
            break
        await asyncio.sleep(0.1)
    rows = await db.fetch("SELECT type, amount FROM ledger_entries WHERE pubkey = $1 ORDER BY id", pubkey)
    assert [tuple(r) for r in rows][:2] == [("deposit", 30), ("debit", -5)]
    assert sum(r["amount"] for r in rows if r["type"] == "expiry") == -25
    assert (await check_conservation(db, pubkey)).ok


async def test_an_account_with_nothing_to_spend_is_not_asked_for_a_lease_per_call(
    make_meter: MeterFactory, db: asyncpg.Connection, pubkey: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An empty account calling ten times a second for 6 s: the store is asked with a doubling wait
    while deposits are announced, once a second while they might be missed, and at once after one."""
    await db.execute("INSERT INTO accounts (pubkey) VALUES ($1)", pubkey)  # an account, no credits
    leases: list[float] = []
    real_lease = ledger.lease
    now = [0.0]

    async def counted(*args: Any, **kwargs: Any) -> Any:  # a spy: the real store still answers
        leases.append(now[0])
        return await real_lease(*args, **kwargs)

    monkeypatch.setattr(ledger, "lease", counted)
    meter = make_meter(clock=lambda: now[0])

    async def calls_for(seconds: float) -> None:
        for _ in range(int(seconds * 10)):
            assert (await meter.admit(pubkey, 1)).outcome is Outcome.INSUFFICIENT
            now[0] = round(now[0] + 0.1, 6)  # exact tenths: the waits are compared with <

    meter.hears_credits = True
    await calls_for(6)
    assert leases == pytest.approx([0.0, 1.0, 3.0])  # waits of 1, 2, then 4 s

    meter.invalidate(pubkey)  # a deposit was announced
    await calls_for(0.1)
    assert len(leases) == 4 and leases[-1] == pytest.approx(6.0)

    meter.hears_credits = False  # notices could be missed: back to once a second
    leases.clear()
    await calls_for(3)
    assert len(leases) == 3


async def test_a_send_hold_takes_the_credits_this_replica_has_leased(
    make_meter: MeterFactory, pool: asyncpg.Pool, db: asyncpg.Connection, pubkey: str
) -> None:
    """An account whose whole balance sits in this replica's lease can still hold a send's price: the
    hold takes it out of the lease (here and at the store), so it is neither refused nor spent twice."""
    await fund(pool, pubkey, 12)
    meter = make_meter()
    assert (await meter.admit(pubkey, 1)).ok  # the lease now holds everything left
    lease = await db.fetchrow("SELECT id, granted FROM credit_leases WHERE pubkey = $1", pubkey)
    assert lease["granted"] == 12

    async def take(lease_id: int | None) -> tuple[sends.Hold, bool]:
        held = await sends.hold(pool, pubkey, new_signature(), "11111111111111111111111111111111", 10, 2, "r", lease_id)
        return held, held.from_lease

    held = await meter.carve(pubkey, 10, take)
    meter.observe(pubkey, held.standing)  # as sendAndConfirm does
    assert held.outcome is sends.HoldOutcome.HELD and held.from_lease
    assert await db.fetchval("SELECT granted FROM credit_leases WHERE id = $1", lease["id"]) == 2
    assert meter.remaining(pubkey) == 1  # 12 - 1 spent - 10 held
    assert (await meter.admit(pubkey, 2)).outcome is Outcome.INSUFFICIENT
    short = await meter.carve(pubkey, 10, take)  # nothing left anywhere: refused, the lease untouched
    assert short.outcome is sends.HoldOutcome.INSUFFICIENT and meter.remaining(pubkey) == 1
    await meter.flush(final=True)
    await check_conservation(pool, pubkey)


async def test_admit_all_reserves_the_whole_list_or_nothing(
    make_meter: MeterFactory, pool: asyncpg.Pool, db: asyncpg.Connection, pubkey: str
) -> None:
    """A bulk request: one lease covers the sum, each item its own usage record, charged or refunded."""
    await fund(pool, pubkey, 100)
    meter = make_meter()
    short = await meter.admit_all(pubkey, [5] * 21)  # 105 > 100: nothing spent
    assert not isinstance(short, list) and short.outcome is Outcome.INSUFFICIENT and short.price == 105
    assert meter.remaining(pubkey) == 100 and meter.unsettled(pubkey) == 0
    admitted = await meter.admit_all(pubkey, [5] * 20)
    assert isinstance(admitted, list) and len(admitted) == 20 and all(a.ok for a in admitted)
    assert len({id(a.lease) for a in admitted}) == 1
    assert meter.remaining(pubkey) == 0
    for n, admission in enumerate(admitted):
        meter.complete(admission, "bulk/getTransactions", f"r:{n}", refunded=n % 4 == 0)
    await meter.flush()
    assert await balance(pool, pubkey) == 100 - 15 * 5
    rows = await db.fetch("SELECT credits FROM usage_history WHERE pubkey = $1", pubkey)
    assert len(rows) == 20
    assert (await check_conservation(db, pubkey)).ok


async def test_admit_all_refills_the_lease_once_for_the_sum(
    make_meter: MeterFactory, pool: asyncpg.Pool, db: asyncpg.Connection, pubkey: str
) -> None:
    await fund(pool, pubkey, 10_000)
    meter = make_meter()
    first = await meter.admit(pubkey, 1)  # a lease of 20
    assert first.ok
    admitted = await meter.admit_all(pubkey, [1] * 100)  # more than it holds: one new lease for all
    assert isinstance(admitted, list) and len({id(a.lease) for a in admitted}) == 1
    assert admitted[0].lease is not first.lease
    assert await meter.admit_all(pubkey, []) == []
    for n, admission in enumerate([first, *admitted]):
        meter.complete(admission, "bulk/getBalances", f"r:{n}")
    await meter.flush()
    assert await balance(pool, pubkey) == 10_000 - 101
    assert (await check_conservation(db, pubkey)).ok


async def test_admit_all_unknown_account(make_meter: MeterFactory) -> None:
    meter = make_meter()
    refused = await meter.admit_all(new_pubkey(), [1, 1])
    assert not isinstance(refused, list) and refused.outcome is Outcome.NO_ACCOUNT


async def test_a_deposit_announced_during_a_lease_request_is_not_hidden_by_its_empty_answer(
    make_meter: MeterFactory, pool: asyncpg.Pool, db: asyncpg.Connection, pubkey: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The notice can overtake the store's answer: the request read the balance before the credit
    committed, the notice arrived before the answer. That answer must not start a new backoff."""
    await db.execute("INSERT INTO accounts (pubkey) VALUES ($1)", pubkey)
    now = [100.0]
    meter = make_meter(clock=lambda: now[0])
    meter.hears_credits = True
    assert (await meter.admit(pubkey, 1)).outcome is Outcome.INSUFFICIENT  # empty: wait 1 s
    now[0] = 101.0
    real_lease = ledger.lease

    async def overtaken(*args: Any, **kwargs: Any) -> Any:
        grant = await real_lease(*args, **kwargs)  # empty: the deposit is not in the store yet
        await fund(pool, pubkey, 50)  # ...then it is credited and announced before the answer arrives
        now[0] = 101.5
        meter.invalidate(pubkey)
        return grant

    monkeypatch.setattr(ledger, "lease", overtaken)
    assert (await meter.admit(pubkey, 1)).outcome is Outcome.INSUFFICIENT
    monkeypatch.setattr(ledger, "lease", real_lease)
    assert (await meter.admit(pubkey, 1)).ok  # asked again at once, not after a doubled wait


async def spent_out(make_meter: MeterFactory, pool: asyncpg.Pool, pubkey: str) -> Meter:
    """A meter whose account's lease is spent out, its rate high enough that one refill serves 200 calls."""
    await fund(pool, pubkey, 100_000)
    meter = make_meter()
    assert (await meter.admit(pubkey, 1)).ok  # the first lease: 20 credits
    await meter.prefetched()
    acct = meter.accounts[pubkey]
    acct.leases[-1].spent = acct.leases[-1].granted
    acct.rate = 1_000.0
    return meter


async def passes_apart(meter: Meter, pubkey: str, callers: int, *others: Awaitable[Any]) -> int:
    """``callers`` calls of 1 credit at once (beside ``others``): how many event-loop passes apart the
    first and the last were admitted."""
    passes, done_at = 0, []

    async def ticker() -> None:
        nonlocal passes
        while True:
            passes += 1
            await asyncio.sleep(0)

    async def caller() -> None:
        assert (await meter.admit(pubkey, 1)).ok
        done_at.append(passes)

    ticking = asyncio.create_task(ticker())
    await asyncio.gather(*(caller() for _ in range(callers)), *others)
    ticking.cancel()
    return max(done_at) - min(done_at)


async def test_callers_short_of_credits_share_one_refill_and_proceed_together(
    make_meter: MeterFactory, pool: asyncpg.Pool, pubkey: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the lease runs out under many callers (a thousand WebSocket writers of one account), they
    wait for the one lease being taken and then all spend from it in the same event-loop pass, instead
    of being handed the account lock one per pass."""
    meter = await spent_out(make_meter, pool, pubkey)
    real_lease, leases = ledger.lease, []

    async def slow(*args: Any, **kwargs: Any) -> Any:
        leases.append(args[3])
        await asyncio.sleep(0.05)
        return await real_lease(*args, **kwargs)

    monkeypatch.setattr(ledger, "lease", slow)
    apart = await passes_apart(meter, pubkey, 200)
    assert len(leases) == 1, leases  # one refill for all of them
    assert apart <= 2, apart


async def test_callers_short_while_a_flush_holds_the_lock_wait_for_one_turn_not_in_line(
    make_meter: MeterFactory, pool: asyncpg.Pool, pubkey: str
) -> None:
    """The lease runs out while the account lock is held (a usage flush's chunk, a prefetch): one caller
    takes its turn at the lock and the others wait for that turn, then all spend from the lease it took
    in the same pass. In line at the lock they would be handed it one per event-loop pass, and under a
    fan-out's load the last of a thousand WebSocket writers delivered nothing (bench/ws_fanout.py)."""
    meter = await spent_out(make_meter, pool, pubkey)
    acct = meter.accounts[pubkey]

    async def flush_chunk() -> None:
        async with acct.lock:
            await asyncio.sleep(0.05)

    holding = asyncio.create_task(flush_chunk())
    await asyncio.sleep(0)  # the lock is held before the callers run short
    assert await passes_apart(meter, pubkey, 200, holding) <= 2


async def test_another_meters_lease_does_not_lower_the_remaining_credits(
    make_meter: MeterFactory, pool: asyncpg.Pool, pubkey: str
) -> None:
    """A lease is where credits wait to be spent, not spending: another process holding one (a second
    replica, a gRPC server) leaves this one's figure alone; its spending shows once it is settled."""
    await fund(pool, pubkey, 1_000)
    other, meter = make_meter(), make_meter()
    spent_there = await other.admit(pubkey, 1)  # the other process leases 20 and spends 1
    assert spent_there.ok
    spent_here = await meter.admit(pubkey, 1)  # this one leases too, after it
    assert spent_here.ok and meter.remaining(pubkey) == 1_000 - 1  # the balance less what this replica spent
    other.complete(spent_there, "grpc:GetSlot", "g1")
    await other.flush()
    meter.complete(spent_here, "getSlot", "r1")
    await meter.flush()  # its answer shows the other's settled spending too
    assert meter.remaining(pubkey) == 1_000 - 2 == await balance(pool, pubkey)
    assert other.remaining(pubkey) == 1_000 - 1  # and the other's own: its lease is not spending either


async def test_a_send_settled_here_stops_counting_at_once(
    make_meter: MeterFactory, pool: asyncpg.Pool, pubkey: str
) -> None:
    """A pending send's hold counts until its settlement, whose answer shows at once; an older answer
    that arrives after it (a flush that committed first) does not bring the hold back."""
    await fund(pool, pubkey, 100)
    meter = make_meter()
    assert (await meter.admit(pubkey, 1)).ok
    signature = new_signature()

    async def take(lease_id: int | None) -> tuple[sends.Hold, bool]:
        held = await sends.hold(pool, pubkey, signature, "11111111111111111111111111111111", 10, 2, "r", lease_id)
        return held, held.from_lease

    held = await meter.carve(pubkey, 10, take)
    meter.observe(pubkey, held.standing)
    assert meter.remaining(pubkey) == 100 - 1 - 10
    before_settle = held.standing
    settled = await sends.settle(pool, signature, sends.SendStatus.FAILED)
    assert settled is not None and settled.standing is not None
    meter.observe(pubkey, settled.standing)
    assert meter.remaining(pubkey) == 100 - 1 - 2 == await balance(pool, pubkey) - 1
    meter.observe(pubkey, before_settle)  # older: ignored
    assert meter.remaining(pubkey) == 100 - 1 - 2


async def test_a_stopping_meter_settles_and_releases_through_a_store_outage(
    database_url: str, db: asyncpg.Connection, pubkey: str
) -> None:
    """A replica stopping (scaled in) while its account's row is locked elsewhere: its first flushes fail
    (lock_timeout), and stop() tries again until its usage is charged and its lease released."""
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=2, server_settings={"lock_timeout": "100"})
    try:
        await fund(pool, pubkey, 100)
        meter = Meter(pool)
        for n in range(5):
            admission = await meter.admit(pubkey, 2)
            meter.complete(admission, "getSlot", f"stop-{n}")
        async with db.transaction():
            await db.execute("SELECT 1 FROM accounts WHERE pubkey = $1 FOR UPDATE", pubkey)
            stopping = asyncio.create_task(meter.stop())
            await asyncio.sleep(1.0)  # flushes refused on the lock meanwhile
            assert not stopping.done()
        await asyncio.wait_for(stopping, 10)
        assert not meter.holding()
        assert await balance(pool, pubkey) == 90
        live = await db.fetchval("SELECT count(*) FROM credit_leases WHERE pubkey = $1 AND NOT released", pubkey)
        assert live == 0
        report = await check_conservation(db, pubkey)
        assert report.ok and report.consumed == 10, report
    finally:
        await pool.close()


async def test_a_connections_deliveries_are_one_usage_row_per_flush(
    make_meter: MeterFactory, pool: asyncpg.Pool, db: asyncpg.Connection, pubkey: str
) -> None:
    """Notifications completed ``tallied``: one row per connection and method per flush, with the count;
    the ledger's debit and the balance are the same as a row each would give."""
    await fund(pool, pubkey, 10_000)
    meter = make_meter()
    for n in range(300):
        admission = await meter.admit(pubkey, 1)
        meter.complete(admission, "accountNotification", f"ws-{n % 2}", tallied=True)
    refunded = await meter.admit(pubkey, 1)  # a refunded one stays a row of its own
    meter.complete(refunded, "accountNotification", "ws-0", refunded=True, tallied=True)
    await meter.flush()
    rows = await db.fetch(
        """SELECT request_id, refunded, sum(credits) AS credits, sum(calls) AS calls, count(*) AS n
           FROM usage_history WHERE pubkey = $1 GROUP BY request_id, refunded ORDER BY request_id, refunded""",
        pubkey,
    )
    assert [(r["request_id"], r["refunded"], r["credits"], r["calls"]) for r in rows] == [
        ("ws-0", False, 150, 150),
        ("ws-0", True, 0, 1),
        ("ws-1", False, 150, 150),
    ]
    assert rows[0]["n"] <= 4  # one per lease the 300 were spent from (20 credits, then prefetched ones)
    assert await balance(pool, pubkey) == 10_000 - 300
    debits = await db.fetch("SELECT description FROM ledger_entries WHERE pubkey = $1 AND type = 'debit'", pubkey)
    assert sum(int(r["description"].split(" × ")[0]) for r in debits) == 301  # every delivery counted
    assert (await check_conservation(db, pubkey)).ok


@pytest.mark.parametrize("prices", [[1] * 30, [1, 5, 25, 1, 5, 2] * 5, [25] * 8, [25] * 12, []])
async def test_spending_a_batch_at_once_books_as_spending_each_in_turn(
    make_meter: MeterFactory, pool: asyncpg.Pool, prices: list[int]
) -> None:
    """spend_local_each leaves the lease and the account as spend_local of each price does (the same
    spent, in flight, window and prefetch) and admits each price; complete_charged of them all records
    what complete of each does."""
    books = []
    for each in (False, True):
        pubkey = new_pubkey()
        await fund(pool, pubkey, 1_000)
        meter = make_meter(clock=lambda: 100.0)
        await meter.prepare(pubkey, 25)  # a lease of 20 × 25
        at = datetime.now(UTC)
        admissions: list[Admission | None]
        if each:
            assert meter.covers_local(pubkey, sum(prices), 100.0)
            spent = meter.spend_local_each(pubkey, prices, 100.0, at)
            assert spent is not None
            admissions = list(spent)
        else:
            admissions = [meter.spend_local(pubkey, price, at) for price in prices]
        assert [a.price for a in admissions if a is not None and a.ok and a.at == at] == prices
        acct = meter.accounts[pubkey]
        lease = acct.leases[-1]
        books.append((lease.granted, lease.spent, lease.inflight, lease.prefetched, acct.window, acct.last_used))
        done = [(admission, "getSlot", f"r:{n}") for n, admission in enumerate(admissions) if admission is not None]
        if each:
            meter.complete_charged(done)
        else:
            for admission, method, request_id in done:
                meter.complete(admission, method, request_id)
        assert lease.inflight == 0 and [r.credits for r in lease.records] == prices
        assert all(r.at == at for r in lease.records)
        books.append([(r.method, r.credits, r.refunded, r.request_id, r.calls) for r in lease.records])
    assert books[:2] == books[2:]


async def test_completing_on_a_dead_lease_records_nothing(make_meter: MeterFactory, pool: asyncpg.Pool) -> None:
    """A lease that ended (expired, released) takes no usage: complete and complete_charged drop it alike."""
    pubkey = new_pubkey()
    await fund(pool, pubkey, 1_000)
    meter = make_meter()
    await meter.prepare(pubkey, 1)
    lease = meter.accounts[pubkey].leases[-1]
    admissions = [meter.spend_local(pubkey, 1) for _ in range(3)]
    lease.dead = True
    first, *rest = [a for a in admissions if a is not None]
    meter.complete(first, "getSlot", "r:0")
    meter.complete_charged([(a, "getSlot", f"r:{n}") for n, a in enumerate(rest, 1)])
    assert len(rest) == 2 and lease.inflight == 0 and lease.records == []


async def test_a_batch_the_lease_does_not_cover_spends_nothing(make_meter: MeterFactory, pool: asyncpg.Pool) -> None:
    pubkey = new_pubkey()
    await fund(pool, pubkey, 1_000)
    meter = make_meter()
    await meter.prepare(pubkey, 1)  # a lease of 20 credits
    lease = meter.accounts[pubkey].leases[-1]
    assert not meter.covers_local(pubkey, lease.granted + 1, meter.clock())
    assert meter.spend_local_each(pubkey, [1] * (lease.granted + 1), meter.clock(), datetime.now(UTC)) is None
    assert lease.spent == 0 and lease.inflight == 0


async def test_a_usage_backlog_past_its_bound_is_settled_before_the_call_goes_on(
    make_meter: MeterFactory, pool: asyncpg.Pool, db: asyncpg.Connection, pubkey: str
) -> None:
    """Usage recorded faster than it is settled (100-item batches from many connections) is settled by the
    account's next call once past ``backlog_max`` (issue 64): what a stopping replica must still write stays
    within a few chunks, and every call is charged once."""
    await fund(pool, pubkey, 1_000)
    meter = make_meter(flush_chunk=5)
    bound = meter.keeper.backlog_max
    calls = bound * 3
    for n in range(calls):
        meter.complete(await meter.admit(pubkey, 1), "getSlot", f"r{n}")
    acct = meter.backlogged(pubkey)
    assert acct is not None
    await meter.settle_backlog(acct, pubkey)
    assert meter.backlogged(pubkey) is None
    waiting = sum(len(lease.records) for lease in acct.leases)
    assert 0 < waiting <= bound
    assert await balance(pool, pubkey) == 1_000 - (calls - waiting)  # the settled part, charged once
    await meter.stop()
    assert await balance(pool, pubkey) == 1_000 - calls
    assert int(await db.fetchval("SELECT count(*) FROM usage_history WHERE pubkey = $1", pubkey)) == calls
    assert (await check_conservation(db, pubkey)).ok


async def _spent(meter: Meter, pubkey: str, calls: int) -> None:
    for n in range(calls):
        meter.complete(await meter.admit(pubkey, 1), "getSlot", f"r{n}")


async def test_a_settled_read_reads_again_when_a_settle_lands_between_its_reads(
    make_meter: MeterFactory, pool: asyncpg.Pool, pubkey: str
) -> None:
    """The store's balance read before a settle and the unsettled usage after it would lose the settled
    calls (issue 66: a drained account shown holding what it spent); the read is made again."""
    await fund(pool, pubkey, 100)
    meter = make_meter()
    await _spent(meter, pubkey, 10)
    reads = 0

    async def read_then_settle() -> int | None:
        nonlocal reads
        reads += 1
        stored = await balance(pool, pubkey)
        if reads == 1:
            await meter.flush()
        return stored

    stored, unsettled = await meter.settled_read(pubkey, read_then_settle)
    assert reads == 2 and (stored, unsettled) == (90, 0)


async def test_a_settled_read_waits_for_a_settle_in_flight(
    make_meter: MeterFactory, pool: asyncpg.Pool, pubkey: str
) -> None:
    await fund(pool, pubkey, 100)
    meter = make_meter()
    await _spent(meter, pubkey, 10)
    acct = meter.accounts[pubkey]
    flushing = asyncio.create_task(meter.flush())
    for _ in range(100):
        if acct.settles % 2:  # the settle's transaction is under way
            break
        await asyncio.sleep(0)
    assert acct.settles % 2 == 1
    stored, unsettled = await meter.settled_read(pubkey, lambda: balance(pool, pubkey))
    assert acct.settles % 2 == 0 and stored is not None and stored - unsettled == 90
    await flushing


async def test_a_settled_read_that_keeps_crossing_settles_reads_under_the_settling_lock(
    make_meter: MeterFactory, pool: asyncpg.Pool, pubkey: str
) -> None:
    await fund(pool, pubkey, 100)
    meter = make_meter()
    await _spent(meter, pubkey, 10)
    acct = meter.accounts[pubkey]
    locked: list[bool] = []

    async def read_crossed() -> int | None:
        locked.append(acct.settling.locked())
        if not acct.settling.locked():
            acct.settles += 2  # as if a whole settle had landed meanwhile
        return await balance(pool, pubkey)

    stored, unsettled = await meter.settled_read(pubkey, read_crossed)
    assert locked == [False] * READ_TRIES + [True] and (stored, unsettled) == (100, 10)
