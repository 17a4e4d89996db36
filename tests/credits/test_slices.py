"""Account-shard slices: the shard's book (pure, clocks passed in) and the replica's SlicedLimiter over
in-process shards; the stage refusing 503 when the shard cannot be reached. The same over real Ray
actors is tests/limits/test_shard_actors.py.

The bound tested (gateway/limits/shards.py): whatever the replicas do with their slices, the tokens
spent by all of them in any window of W seconds are at most ``burst + rps * W``.
"""

from __future__ import annotations

import asyncio
import bisect
from dataclasses import replace

import asyncpg
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.app.features import method_registry
from gateway.core.identity import Identity
from gateway.core.methods import PriceTable
from gateway.credits.meter import Meter
from gateway.credits.stage import CreditHeaders, MeteringStage
from gateway.limits.rules import Allowed, ConcurrencyLimited, RateLimited, Taken
from gateway.limits.shards import ShardBook, SliceGrant, SliceRequest, shard_of
from gateway.limits.slices import LocalShards, ShardUnavailable, SlicedLimiter
from gateway.pipeline.http import http_call
from gateway.pipeline.stages import Call, Handler, Reply, ReplyStyle, compose, error_boundary
from gateway.rpc.forward import Forwarder, ParseStage
from gateway.storage.ledger import balance
from tests.credits.helpers import ScriptedNode, fund

WALL = 1_700_000_000.0


def max_in_window(times: list[float], window: float) -> int:
    """The most of ``times`` (sorted) inside any closed window of ``window`` seconds."""
    return max((bisect.bisect_right(times, t + window) - i for i, t in enumerate(times)), default=0)


class Replica:
    """One replica's side of the protocol, by hand: what it holds, spends, reports and gives back."""

    def __init__(self, name: str) -> None:
        self.name, self.epoch, self.lease = name, "", 0
        self.tokens = self.spent = self.slots = self.active = 0
        self.deadline = 0.0

    def exchange(self, book: ShardBook, now: float, want: int, give_back: bool, want_slots: int) -> SliceGrant:
        returned = self.tokens if give_back else 0
        self.tokens -= returned
        request = SliceRequest(
            "acct", self.name, self.epoch, self.lease, 10, 10, 4, self.spent, returned, want, False,
            self.active, max(self.active, want_slots),
        )  # fmt: skip
        self.spent = 0
        grant = book.exchange(request, now)
        if (grant.epoch, grant.lease) != (self.epoch, self.lease):
            self.tokens, self.epoch, self.lease = 0, grant.epoch, grant.lease
        self.tokens += grant.tokens
        self.slots = grant.slots
        self.deadline = now + grant.ttl_s - 0.5
        return grant

    def spend(self, now: float, n: int) -> int:
        n = min(n, self.tokens) if now < self.deadline else 0
        self.tokens -= n
        self.spent += n
        return n


OPS = st.lists(
    st.tuples(
        st.integers(0, 2),  # which replica
        st.floats(0.0, 0.7),  # time passing before the op
        st.sampled_from(["exchange", "spend", "give_back", "restart"]),
        st.integers(0, 25),  # tokens wanted, or spent
    ),
    max_size=120,
)


@settings(max_examples=300, deadline=None)
@given(OPS)
def test_all_replicas_together_never_exceed_burst_plus_rate_times_window(
    ops: list[tuple[int, float, str, int]],
) -> None:
    """rps 10, burst 10, three replicas, arbitrary exchanges, spending, give-backs and shard restarts."""
    book, now, restarts = ShardBook("e0"), 0.0, 0
    replicas = [Replica(f"r{n}") for n in range(3)]
    spent_at: list[float] = []
    for who, dt, op, n in ops:
        now += dt
        replica = replicas[who]
        if op == "restart":  # a new incarnation: no holders; replicas keep what they hold until their deadline
            restarts += 1
            book = ShardBook(f"e{restarts}", restarted_at=now)
        elif op == "spend":
            spent_at += [now] * replica.spend(now, n)
        else:
            replica.exchange(book, now, n, op == "give_back", 0)
    for window in (0.0, 0.5, 1.0, 3.0, 10.0):
        assert max_in_window(spent_at, window) <= 10 + 10 * window


def test_one_replica_may_take_the_whole_limit_and_the_others_get_what_it_gives_back() -> None:
    book = ShardBook("e")
    a, b = Replica("a"), Replica("b")
    assert a.exchange(book, 0.0, 10, False, 0).tokens == 10  # the whole burst to one replica
    grant = b.exchange(book, 0.0, 5, False, 0)
    assert grant.tokens == 0 and grant.wait_s == pytest.approx(0.1)
    assert a.spend(0.0, 4) == 4
    a.exchange(book, 0.0, 0, True, 0)  # reports 4 spent, gives 6 back
    assert b.exchange(book, 0.0, 10, False, 0).tokens == 6
    assert b.exchange(book, 0.5, 10, False, 0).tokens == 4  # 6 outstanding: the bucket holds 4 at most
    assert b.spend(0.5, 10) == 10
    assert b.exchange(book, 1.0, 10, False, 0).tokens == 5  # 0.5 s at 10/s, the spending reported


def test_slots_are_never_granted_beyond_the_limit_and_return_with_the_holder() -> None:
    book = ShardBook("e")
    a, b = Replica("a"), Replica("b")
    assert a.exchange(book, 0.0, 0, False, 3).slots == 3
    assert b.exchange(book, 0.0, 0, False, 3).slots == 1  # 4 in all
    a.active = 2
    assert a.exchange(book, 0.1, 0, False, 2).slots == 2  # one given back
    assert b.exchange(book, 0.1, 0, False, 3).slots == 2
    assert b.exchange(book, 2.2, 0, False, 4).slots == 4  # a was not heard from for the TTL: forgotten


def test_a_restarted_shard_counts_the_calls_in_flight_before_granting_anything() -> None:
    book = ShardBook("e0")
    a, b, c = Replica("a"), Replica("b"), Replica("c")
    a.exchange(book, 0.0, 0, False, 4)
    a.active = 4
    book = ShardBook("e1", restarted_at=10.0)  # killed and restarted: it knows nothing; young until 11.0
    assert b.exchange(book, 10.0, 0, False, 4).slots == 0  # young: no new slots
    assert a.exchange(book, 10.3, 0, False, 4).slots == 4  # a's calls in flight are taken as given
    assert c.exchange(book, 10.5, 10, False, 0).tokens == 0  # young: no tokens either
    a.exchange(book, 10.8, 0, False, 4)  # a renews what it holds
    assert b.exchange(book, 11.5, 0, False, 4).slots == 0  # past the young period: still full
    assert c.exchange(book, 11.5, 10, False, 0).tokens == 5  # the bucket fills from the end of it
    a.active = 1
    a.exchange(book, 11.6, 0, True, 0)
    assert b.exchange(book, 11.6, 0, False, 4).slots == 3


def test_a_bulk_request_larger_than_the_burst_takes_a_full_bucket_into_debt() -> None:
    book = ShardBook("e")
    req = SliceRequest("acct", "a", "", 0, 10, 10, 4, want_tokens=25, whole=True)
    first = book.exchange(req, 0.0)
    assert first.tokens == 25 and first.wait_s == pytest.approx(1.6)
    second = SliceRequest("acct", "a", first.epoch, first.lease, 10, 10, 4, spent=25, want_tokens=1)
    grant = book.exchange(second, 0.9)
    assert grant.tokens == 0 and grant.remaining == 0  # 0.9 s repaid 9 of the 15 owed
    assert grant.wait_s == pytest.approx(0.7)


def test_shard_of_is_stable_and_spreads() -> None:
    keys = [f"key-{n}" for n in range(1_000)]
    assert [shard_of(k, 4) for k in keys] == [shard_of(k, 4) for k in keys]
    counts = [sum(shard_of(k, 4) == s for k in keys) for s in range(4)]
    assert min(counts) > 150


# --------------------------------------------------------------------- the replica's limiter, in-process


async def call_once(limiter: SlicedLimiter, pubkey: str, rps: int = 20, concurrency: int = 4) -> str:
    """What the stage does for a one-item call: ready, a slot, a rate unit, the release."""
    loop = asyncio.get_running_loop()
    pending = limiter.ready(pubkey, 1, loop.time(), rps=rps, concurrency=concurrency)
    if pending is not None:
        try:
            await pending
        except ShardUnavailable:
            return "unavailable"
    now = loop.time()
    if limiter.acquire(pubkey, now, rps=rps, concurrency=concurrency) is not None:
        return "concurrency"
    try:
        return "ok" if isinstance(limiter.take(pubkey, now, WALL, rps), Allowed) else "rate"
    finally:
        limiter.release(pubkey)


async def test_replicas_share_one_accounts_rate_through_the_shard() -> None:
    shards = LocalShards(2)
    replicas = [SlicedLimiter(shards, 20, 4) for _ in range(3)]
    try:
        outcomes = [await call_once(replicas[0], "acct") for _ in range(25)]
        assert outcomes.count("ok") == 20 and outcomes[-1] == "rate"  # one replica: the whole burst
        others = [await call_once(r, "acct") for r in replicas[1:] for _ in range(5)]
        assert others.count("ok") <= 1  # and nothing more for the others (a unit may have refilled)
        limited = replicas[1].take("acct", asyncio.get_running_loop().time(), WALL, 20)
        assert isinstance(limited, RateLimited) and limited.retry_after_s == 1
    finally:
        for r in replicas:
            await r.close()


class SlowShards(LocalShards):
    """In-process shards whose answers take a little while, as an actor's do."""

    async def exchange(self, shard: int, request: SliceRequest) -> SliceGrant:
        await asyncio.sleep(0.002)
        return await super().exchange(shard, request)


async def test_calls_arriving_together_get_the_whole_burst() -> None:
    """60 calls at once at 50/s on a replica holding nothing: the 50 of the burst are admitted, as one
    process's bucket admits them (the calls waiting add up their demand; none gives up early)."""
    limiter = SlicedLimiter(SlowShards(1), 50, 64)
    loop = asyncio.get_running_loop()
    try:
        start = loop.time()
        outcomes = await asyncio.gather(*(call_once(limiter, "acct", 50, 64) for _ in range(60)))
        refilled = int(50 * (loop.time() - start)) + 1
        assert 50 <= outcomes.count("ok") <= 50 + refilled and set(outcomes) == {"ok", "rate"}
    finally:
        await limiter.close()


async def test_slots_move_to_the_replica_that_needs_them() -> None:
    shards = LocalShards(1)
    a, b = SlicedLimiter(shards, 100, 4, idle_s=0.05), SlicedLimiter(shards, 100, 4, idle_s=0.05)
    loop = asyncio.get_running_loop()
    try:
        held = 0
        for _ in range(6):
            pending = a.ready("acct", 1, loop.time(), rps=100, concurrency=4)
            if pending is not None:
                await pending
            held += a.acquire("acct", loop.time(), concurrency=4) is None
        assert held == 4  # the whole concurrency on one replica
        pending = b.ready("acct", 1, loop.time(), rps=100, concurrency=4)
        if pending is not None:
            await pending
        assert isinstance(b.acquire("acct", loop.time(), concurrency=4), ConcurrencyLimited)
        for _ in range(4):
            a.release("acct")
        for _ in range(50):  # a gives its idle slots back at its tick
            await asyncio.sleep(0.05)
            if await call_once(b, "acct", 100, 4) == "ok":
                break
        else:
            pytest.fail("the slots a gave back never reached b")
    finally:
        await a.close()
        await b.close()


async def test_a_closing_replica_gives_back_its_tokens_and_slots_at_once() -> None:
    """A replica holding most of the burst and every slot, idle: another gets none of it until the first
    closes, and all of it right after (not when the shard forgets the first, SLICE_TTL_S later)."""
    shards = LocalShards(1)
    a = SlicedLimiter(shards, 20, 4, idle_s=10.0)  # its tick gives nothing back by itself
    b = SlicedLimiter(shards, 20, 4, idle_s=10.0)
    loop = asyncio.get_running_loop()

    async def bulk_of_15(limiter: SlicedLimiter) -> bool:
        pending = limiter.ready("acct", 15, loop.time(), rps=20, concurrency=4, whole=True)
        if pending is not None:
            await pending
        return isinstance(limiter.take_many("acct", 15, loop.time(), WALL, 20), Allowed)

    async def slots(limiter: SlicedLimiter, wanted: int) -> int:
        held = 0
        for _ in range(wanted + 2):
            pending = limiter.ready("acct", 1, loop.time(), rps=20, concurrency=4)
            if pending is not None:
                await pending
            held += limiter.acquire("acct", loop.time(), concurrency=4) is None
        for _ in range(held):
            limiter.release("acct")  # idle again: a keeps the slots it was granted
        return held

    try:
        assert await slots(a, 4) == 4
        pending = a.ready("acct", 15, loop.time(), rps=20, concurrency=4, whole=True)
        if pending is not None:
            await pending  # a holds 15 tokens unspent, and the 4 slots
        assert not await bulk_of_15(b) and await slots(b, 1) == 0
        await a.close()
        await asyncio.sleep(0.06)  # b's backoff after the shard had no slot (SLOT_BACKOFF_S)
        assert await bulk_of_15(b) and await slots(b, 4) == 4
    finally:
        await a.close()
        await b.close()


class DeadShards:
    shards = 2

    async def exchange(self, shard: int, request: SliceRequest) -> SliceGrant:
        raise ShardUnavailable("dead")


async def test_an_unreachable_shard_refuses_rather_than_admits() -> None:
    limiter = SlicedLimiter(DeadShards(), 20, 4)
    try:
        assert [await call_once(limiter, "acct") for _ in range(3)] == ["unavailable"] * 3
    finally:
        await limiter.close()


async def test_the_stage_answers_503_with_retry_after_and_charges_nothing(pool: asyncpg.Pool, pubkey: str) -> None:
    await fund(pool, pubkey, 1_000)
    meter = Meter(pool)
    limiter = SlicedLimiter(DeadShards(), 20, 4)

    async def authenticate(call: Call, next_handler: Handler) -> Reply:
        call.identity = Identity(pubkey, "api_key")
        return await next_handler(call)

    stage = MeteringStage(meter, limiter, lambda pubkey: {})
    parse = ParseStage(method_registry(), PriceTable.default())
    handler = compose([error_boundary, authenticate, CreditHeaders(stage), parse, stage], Forwarder(ScriptedNode()))
    try:
        body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "getSlot"})
        reply = await handler(http_call("POST", "/", {}, style=ReplyStyle.JSONRPC, body=body))
        doc = orjson.loads(reply.body)
        assert reply.status == 503 and reply.headers["Retry-After"] == "1", doc
        assert doc["error"]["data"]["retry_after_secs"] == 1
        assert "X-Ratelimit-Limit" in reply.headers
        await meter.flush()
        assert await balance(pool, pubkey) == 1_000
    finally:
        await limiter.close()
        await meter.stop()


class RecordingShards(LocalShards):
    """In-process shards that keep every request they are sent (to compare what two limiters asked)."""

    def __init__(self) -> None:
        super().__init__(1)
        self.requests: list[SliceRequest] = []

    async def exchange(self, shard: int, request: SliceRequest) -> SliceGrant:
        self.requests.append(request)
        return await super().exchange(shard, request)


@given(
    tokens=st.integers(min_value=0, max_value=40),
    rps=st.integers(min_value=1, max_value=300),
    units=st.integers(min_value=0, max_value=60),
    busy=st.booleans(),
    waiting=st.booleans(),
    expired=st.booleans(),
    down=st.booleans(),
)
@settings(max_examples=200, deadline=None)
def test_take_each_answers_as_take_one_at_a_time(
    tokens: int, rps: int, units: int, busy: bool, waiting: bool, expired: bool, down: bool
) -> None:
    """A batch's units at once leave the slice, answer every item and send the shard the prefetch (its
    ``spent`` included) as ``units`` calls of take would."""

    async def run(
        batch: bool,
    ) -> tuple[Taken | list[Allowed | RateLimited], tuple[int, int, bool, bool], list[SliceRequest]]:
        shards = RecordingShards()
        limiter = SlicedLimiter(shards, rps, 8)
        now = asyncio.get_running_loop().time()
        s = limiter._slice("acct", rps, 8)
        s.tokens, s.spent, s.cap, s.deadline = tokens, 3, 8, now - 1 if expired else now + 5
        s.tokens_at = now + 1 if waiting else 0.0
        if down:
            limiter._down_until[s.shard] = now + 5
        if busy:  # an exchange under way: no prefetch starts
            s.task = asyncio.get_running_loop().create_task(asyncio.sleep(0))
        answers: Taken | list[Allowed | RateLimited]
        if batch:
            answers = limiter.take_each("acct", units, now, WALL)
        else:
            answers = [limiter.take("acct", now, WALL, rps) for _ in range(units)]
        state = (s.tokens, s.spent, s.used_at == now, s.task is not None)
        await limiter._exchanges_done()
        await limiter.close()
        return answers, state, shards.requests[:1]  # the prefetch's request (close's give-back follows)

    one, state_one, sent_one = asyncio.run(run(batch=False))
    taken, state_each, sent_each = asyncio.run(run(batch=True))
    assert isinstance(one, list) and isinstance(taken, Taken)
    granted = [a for a in one if isinstance(a, Allowed)]
    assert one[: len(granted)] == granted and taken.granted == len(granted)
    assert taken.last == (granted[-1] if granted else None)
    assert all(r == taken.refused for r in one[len(granted) :]) and (taken.refused is None) == (len(granted) == units)
    assert state_each == state_one
    assert [replace(r, holder="") for r in sent_each] == [replace(r, holder="") for r in sent_one]
