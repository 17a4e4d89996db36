"""Open-connection seats on the real Redis: a cap over several processes, lapses, refreshes, fail closed."""

from __future__ import annotations

import asyncio
import os

import pytest
import redis.asyncio as aioredis

from gateway.storage.errors import StoreUnavailable
from gateway.storage.seats import TAKES_AT_ONCE, Seats


def new_key() -> str:
    return f"seats:test:{os.urandom(6).hex()}"


async def started(redis: aioredis.Redis, **options: float) -> Seats:
    seats = Seats(**options)
    seats.start(redis)
    return seats


async def test_a_cap_holds_over_processes_and_a_seat_given_back_is_free(redis_client: aioredis.Redis) -> None:
    key = new_key()
    one, two = await started(redis_client), await started(redis_client)  # two replicas
    taken = [await one.take(key, 3), await two.take(key, 3), await two.take(key, 3)]
    assert all(taken)
    assert await one.take(key, 3) is None and await two.take(key, 3) is None
    assert await redis_client.zcard(key) == 3
    seat = taken[1]
    assert seat is not None
    await two.give(seat)
    assert await one.take(key, 3) is not None
    await one.stop()  # a clean stop gives back what it held
    await two.stop()
    assert await redis_client.zcard(key) == 0


async def test_a_dead_holders_seats_lapse_and_a_live_ones_are_refreshed(redis_client: aioredis.Redis) -> None:
    key = new_key()
    live = await started(redis_client, ttl_s=0.6, refresh_s=0.2)
    dead = await started(redis_client, ttl_s=0.6, refresh_s=0.2)
    assert await live.take(key, 2) is not None and await dead.take(key, 2) is not None
    assert dead._task is not None
    dead._task.cancel()  # dies: no refresh, no give-back
    assert await live.take(key, 2) is None
    await asyncio.sleep(1.2)  # two lapses: the dead one's seat is gone, the live one's kept by its refreshes
    assert await live.take(key, 2) is not None
    assert await live.take(key, 2) is None
    await live.stop()


async def test_redis_down_refuses_the_seat(redis_client: aioredis.Redis) -> None:
    gone = aioredis.Redis(unix_socket_path="/nonexistent/redis.sock")
    seats = await started(gone)
    with pytest.raises(StoreUnavailable):
        await seats.take(new_key(), 5)
    assert not seats.held
    await seats.stop()
    await gone.aclose()


async def test_without_redis_it_counts_this_process_only() -> None:
    seats = Seats()
    assert not seats.shared
    first = await seats.take("k", 1)
    assert first is not None and await seats.take("k", 1) is None
    seats.release(first)
    assert await seats.take("k", 1) is not None


async def test_a_crowd_opening_and_closing_at_once_is_counted_exactly(redis_client: aioredis.Redis) -> None:
    """A thousand sockets closing together (a client process gone): every seat removed, a few Redis
    commands at a time, and a cap holds while a crowd takes seats at once."""
    key = new_key()
    seats = await started(redis_client)
    taken = await asyncio.gather(*(seats.take(key, 800) for _ in range(1_000)))
    assert sum(seat is not None for seat in taken) == 800
    assert await redis_client.zcard(key) == 800
    await asyncio.gather(*(seats.give(seat) for seat in taken if seat is not None))
    assert await redis_client.zcard(key) == 0 and not seats.held
    await seats.stop()


async def test_a_seat_lapsed_in_a_redis_outage_counts_again_at_the_next_refresh(redis_client: aioredis.Redis) -> None:
    """Redis out of reach for longer than the lapse: the open connection's member lapses at Redis, and the
    first refresh after Redis comes back adds it again (``ZADD … XX`` never did, so the cap leaked)."""
    key = new_key()
    holder = await started(redis_client, ttl_s=0.5, refresh_s=3_600)  # refreshed by hand below
    other = await started(redis_client, ttl_s=0.5, refresh_s=3_600)
    seat = await holder.take(key, 1)
    assert seat is not None
    gone = aioredis.Redis(unix_socket_path="/nonexistent/redis.sock")
    reachable, holder._refresh = holder._refresh, gone.register_script(holder._refresh.script)  # type: ignore[union-attr]
    with pytest.raises(StoreUnavailable):  # the outage: the holder's refresh cannot reach Redis
        await holder.refresh()
    await asyncio.sleep(1.0)  # past the lapse
    lapsed = await other.take(key, 1)  # the cap no longer sees the open connection
    assert lapsed is not None
    holder._refresh = reachable  # Redis is back
    await holder.refresh()
    assert await redis_client.zscore(key, seat.member) is not None
    await other.give(lapsed)
    assert await other.take(key, 1) is None  # the holder's open connection counts again
    await holder.give(seat)
    assert await other.take(key, 1) is not None
    await holder.stop()
    await other.stop()
    await gone.aclose()


async def test_a_seat_given_back_during_a_refresh_is_not_left_counted(redis_client: aioredis.Redis) -> None:
    """The refresh (no ``XX`` any more) must not bring back a seat removed while it waited its turn."""
    key = new_key()
    seats = await started(redis_client, refresh_s=3_600)
    seat = await seats.take(key, 5)
    assert seat is not None
    for _ in range(TAKES_AT_ONCE):  # every turn at Redis taken: the refresh waits after listing its seats
        await seats._gate.acquire()
    refreshing = asyncio.create_task(seats.refresh())
    await asyncio.sleep(0.05)
    await seats.give(seat)  # removed at Redis before the refresh runs
    assert await redis_client.zcard(key) == 0
    for _ in range(TAKES_AT_ONCE):
        seats._gate.release()
    await refreshing
    if seats._remover is not None:  # the second removal, queued by the refresh
        await seats._remover
    assert await redis_client.zcard(key) == 0
    await seats.stop()
