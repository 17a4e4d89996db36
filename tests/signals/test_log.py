"""The signal log (gateway.signals.store) on the embedded Redis: atomic slot appends with the
cursor, newest-first reads with their bounds, retention, reads after an id."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis

from gateway.signals.rules import SignalEvent
from gateway.signals.store import CursorConflict, SignalLog

PUMP = "6EF8rrecthR5Dkzon8Nwu78hRvfCKubJ14M5uBEwF6P"


def event(slot: int, kind: str = "newPair", n: int = 0) -> SignalEvent:
    return SignalEvent(kind, PUMP, f"sig{slot}x{n}", slot, f"mint{slot}x{n}", (PUMP,), "SOL", "classic", False)  # type: ignore[arg-type]


@pytest.fixture
def signal_log(redis_client: aioredis.Redis, prefix: str) -> SignalLog:
    return SignalLog(redis_client, prefix=prefix)


async def test_a_slot_is_appended_with_the_cursor(signal_log: SignalLog, redis_client: aioredis.Redis) -> None:
    assert await signal_log.cursor() is None and await signal_log.last_id() == "0-0"
    ids = await signal_log.append_slot(5, [event(5), event(5, "largeSwap", 1)])
    assert ids == ["5-0", "5-1"]
    assert await signal_log.cursor() == 5 and await signal_log.last_id() == "5-1"
    assert await signal_log.append_slot(6, []) == []  # a slot without events moves the cursor alone
    assert await signal_log.cursor() == 6
    found = await signal_log.recent(10)
    assert [s.id for s in found.events] == ["5-1", "5-0"]
    assert found.events[1].event == event(5).to_json() and found.cursor == 6 and not found.more
    assert [s.id for s in (await signal_log.recent(10, kind="largeSwap")).events] == ["5-1"]
    assert await redis_client.xlen(signal_log.kind_stream("newPair")) == 1


async def test_a_slot_at_or_before_the_cursor_is_refused_and_writes_nothing(
    signal_log: SignalLog, redis_client: aioredis.Redis
) -> None:
    await signal_log.append_slot(9, [event(9)])
    for slot in (9, 8):
        with pytest.raises(CursorConflict):
            await signal_log.append_slot(slot, [event(slot, n=1)])
    assert await signal_log.cursor() == 9 and await redis_client.xlen(signal_log.stream) == 1


async def test_two_writers_of_one_slot_write_it_once(redis_url: str, prefix: str, redis_client: aioredis.Redis) -> None:
    first, second = aioredis.Redis.from_url(redis_url), aioredis.Redis.from_url(redis_url)
    try:
        logs = [SignalLog(first, prefix=prefix), SignalLog(second, prefix=prefix)]
        await logs[0].append_slot(3, [])
        outcomes = await asyncio.gather(
            *(log.append_slot(4, [event(4, n=i), event(4, n=i + 10)]) for i, log in enumerate(logs)),
            return_exceptions=True,
        )
    finally:
        await first.aclose()
        await second.aclose()
    assert sorted(type(o).__name__ for o in outcomes) == ["CursorConflict", "list"]
    stored = (await logs[0].recent(10)).events
    assert [s.id for s in stored] == ["4-1", "4-0"]
    assert {s.event["signature"] for s in stored} in ({"sig4x0", "sig4x10"}, {"sig4x1", "sig4x11"})  # one writer's


async def test_recent_reads_newest_first_within_its_bounds(signal_log: SignalLog) -> None:
    for slot in range(10, 15):
        await signal_log.append_slot(slot, [event(slot, n=0), event(slot, "graduation", n=1)])
    page = await signal_log.recent(3)
    assert [s.id for s in page.events] == ["14-1", "14-0", "13-1"] and page.more
    older = await signal_log.recent(3, before=page.events[-1].id)
    assert [s.id for s in older.events] == ["13-0", "12-1", "12-0"] and older.more
    assert [s.id for s in (await signal_log.recent(100, before="11-0")).events] == ["10-1", "10-0"]
    assert (await signal_log.recent(100, before="0-0")).events == []
    since = await signal_log.recent(100, since_slot=12)
    assert [s.id for s in since.events] == ["14-1", "14-0", "13-1", "13-0"] and not since.more
    graduations = await signal_log.recent(2, kind="graduation", since_slot=10)
    assert [s.id for s in graduations.events] == ["14-1", "13-1"] and graduations.more
    assert all(s.event["kind"] == "graduation" for s in graduations.events)
    assert (await signal_log.recent(100, since_slot=14)).events == []


async def test_retention_keeps_the_newest_events_of_the_log_and_of_each_kind(
    redis_client: aioredis.Redis, prefix: str
) -> None:
    signal_log = SignalLog(redis_client, retention=5, prefix=prefix)
    for slot in range(1, 4):
        await signal_log.append_slot(slot, [event(slot, n=0), event(slot, n=1), event(slot, "largeSwap", n=2)])
    assert await redis_client.xlen(signal_log.stream) == 5
    assert [s.id for s in (await signal_log.recent(100)).events] == ["3-2", "3-1", "3-0", "2-2", "2-1"]
    assert [s.id for s in (await signal_log.recent(100, kind="newPair")).events] == ["3-1", "3-0", "2-1", "2-0", "1-1"]
    assert [s.id for s in (await signal_log.recent(100, kind="largeSwap")).events] == ["3-2", "2-2", "1-2"]


async def test_read_after_an_id_gets_what_follows_oldest_first(signal_log: SignalLog) -> None:
    await signal_log.append_slot(20, [event(20)])
    await signal_log.append_slot(21, [event(21), event(21, n=1)])
    everything = await signal_log.read_after("0-0")
    assert [s.id for s in everything] == ["20-0", "21-0", "21-1"]
    assert [s.id for s in await signal_log.read_after("20-0", count=1)] == ["21-0"]
    assert await signal_log.read_after("21-1", block_ms=50) == []
    waiting = asyncio.create_task(signal_log.read_after("21-1", block_ms=3_000))
    await asyncio.sleep(0.1)
    await signal_log.append_slot(22, [event(22)])
    assert [s.id for s in await waiting] == ["22-0"]
