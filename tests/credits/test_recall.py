"""Credits leased by one replica, asked back by another: real PostgreSQL, real Redis channel, real meters.

A balance of N credits admits exactly N credits of calls however the calls spread over the replicas,
without waiting for a lease to go idle (``idle_release_s`` is a minute here) or to expire.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator

import asyncpg
import pytest
import redis.asyncio as aioredis

from gateway.credits.meter import Meter, Outcome
from gateway.credits.recall import CreditRecall
from gateway.storage.channels import RECALL, Channel
from gateway.storage.ledger import balance, check_conservation
from tests.credits.helpers import fund

IDLE_S = 60.0  # no lease is released for idleness during a test


class Replicas:
    """Meters sharing one account's balance, each following the recall channel."""

    def __init__(self, pool: asyncpg.Pool, redis: aioredis.Redis) -> None:
        self.pool, self.redis = pool, redis
        self.meters: list[Meter] = []
        self.recalls: list[CreditRecall] = []

    async def make(self, n: int) -> list[Meter]:
        for _ in range(n):
            meter = Meter(self.pool, replicas=n, idle_release_s=IDLE_S, flush_interval_s=0.05)
            meter.start()
            recall = CreditRecall(meter, wait_s=1.0)
            recall.start(Channel(self.redis, RECALL))
            self.meters.append(meter)
            self.recalls.append(recall)
        deadline = time.monotonic() + 5
        while not all(r.live for r in self.recalls):  # a want published before would not be heard
            assert time.monotonic() < deadline, "recall channel never subscribed"
            await asyncio.sleep(0.01)
        return self.meters

    async def close(self) -> None:
        for recall in self.recalls:
            await recall.stop()
        for meter in self.meters:
            await meter.stop()


@pytest.fixture
async def replicas(pool: asyncpg.Pool, redis_client: aioredis.Redis) -> AsyncIterator[Replicas]:
    made = Replicas(pool, redis_client)
    yield made
    await made.close()


async def drain(meter: Meter, pubkey: str, tag: str) -> int:
    """Calls of price 1 on ``meter`` until one is refused; answers how many were admitted."""
    admitted = 0
    while (admission := await meter.admit(pubkey, 1)).ok:
        meter.complete(admission, "getSlot", f"{tag}{admitted}")
        admitted += 1
    assert admission.outcome is Outcome.INSUFFICIENT
    return admitted


async def settled(db: asyncpg.Connection, pool: asyncpg.Pool, pubkey: str, meters: list[Meter]) -> int:
    """Stop the meters (every lease settled and released) and answer the account's final balance."""
    for meter in meters:
        await meter.stop()
    report = await check_conservation(db, pubkey)
    assert report.ok, report
    live = await db.fetchval("SELECT count(*) FROM credit_leases WHERE pubkey = $1 AND NOT released", pubkey)
    assert live == 0
    final = await balance(pool, pubkey)
    assert final is not None
    return final


async def test_one_replica_spends_the_credits_another_holds_leased(
    replicas: Replicas, pool: asyncpg.Pool, db: asyncpg.Connection, pubkey: str
) -> None:
    """B leases part of 57 credits for one call still in flight; A alone then spends all the rest at
    once: B gives back its lease's unspent part on A's ask, and its call in flight keeps its credit."""
    n = 57
    await fund(pool, pubkey, n)
    a, b = await replicas.make(2)
    in_flight = await b.admit(pubkey, 1)
    assert in_flight.ok and in_flight.lease is not None and in_flight.lease.granted > 1
    started = time.monotonic()
    assert await drain(a, pubkey, "a") == n - 1
    assert time.monotonic() - started < IDLE_S / 4
    b.complete(in_flight, "getSlot", "b0")
    assert await settled(db, pool, pubkey, [a, b]) == 0


@pytest.mark.parametrize("count", [2, 4])
async def test_a_balance_admits_exactly_its_credits_however_the_calls_spread(
    replicas: Replicas, pool: asyncpg.Pool, db: asyncpg.Connection, pubkey: str, count: int
) -> None:
    """Concurrent calls of price 1, nine in ten on the first replica, the rest spread over the others,
    far more than the balance; then the first replica alone: exactly N admitted in all, never more."""
    n = 120
    await fund(pool, pubkey, n)
    meters = await replicas.make(count)
    rng = random.Random(count)

    async def call(i: int) -> bool:
        meter = meters[0] if rng.random() < 0.9 else meters[1 + i % (count - 1)]
        admission = await meter.admit(pubkey, 1)
        if not admission.ok:
            return False
        await asyncio.sleep(rng.random() / 50)
        meter.complete(admission, "getSlot", f"s{i}")
        return True

    stormed = sum(await asyncio.gather(*(call(i) for i in range(400))))
    assert stormed <= n
    assert stormed + await drain(meters[0], pubkey, "d") == n
    assert await settled(db, pool, pubkey, meters) == 0


async def test_a_gone_holder_costs_a_bounded_wait_not_a_hang(
    replicas: Replicas, pool: asyncpg.Pool, db: asyncpg.Connection, pubkey: str
) -> None:
    """A holder that crashed answers nothing: the asker refuses after its wait, and the lease holds its
    credits until it expires, as without the recall."""
    await fund(pool, pubkey, 40)
    a, b = await replicas.make(2)
    assert (await b.admit(pubkey, 1)).ok
    await replicas.recalls[1].stop()
    b.kill()
    started = time.monotonic()
    admitted = await drain(a, pubkey, "a")
    assert admitted < 39  # b's lease still holds its part
    assert time.monotonic() - started < 5
