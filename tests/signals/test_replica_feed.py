"""The replica's feed (gateway.signals.feed) on the embedded Redis: every event after its start, once
and in order, to each listener, across its Redis connection being killed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from gateway.signals.feed import SignalFeed
from gateway.signals.rules import SignalEvent
from gateway.signals.store import SignalLog

PUMP = "6EF8rrecthR5Dkzon8Nwu78hRvfCKubJ14M5uBEwF6P"


def event(slot: int, n: int = 0) -> SignalEvent:
    return SignalEvent("largeSwap", PUMP, f"sig{slot}x{n}", slot, f"mint{slot}", side="buy", sol_amount=n)


async def until_true(check: Any, what: str, timeout_s: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not check():
        assert asyncio.get_running_loop().time() < deadline, f"gave up waiting: {what}"
        await asyncio.sleep(0.02)


def failing_listener(event_id: str, doc: dict[str, Any]) -> None:
    raise RuntimeError(f"this listener fails on {event_id}")


async def connection_of(admin: aioredis.Redis, name: str) -> int | None:
    """The id of the connection named ``name`` (the feed's client names its connections)."""
    return next((int(c["id"]) for c in await admin.client_list() if c.get("name") == name), None)


@pytest.mark.parametrize("client_retries", [True, False], ids=["client-retries", "feed-recovers"])
async def test_each_event_reaches_each_listener_once_across_a_connection_reset(
    redis_url: str, redis_client: aioredis.Redis, prefix: str, client_retries: bool
) -> None:
    name = f"{prefix}-feed"
    options: dict[str, Any] = {} if client_retries else {"retry": Retry(NoBackoff(), 0)}
    feed_client = aioredis.Redis.from_url(redis_url, client_name=name, socket_timeout=5, **options)
    writer = SignalLog(redis_client, prefix=prefix)
    await writer.append_slot(1, [event(1)])  # before the start: not delivered
    feed = SignalFeed(SignalLog(feed_client, prefix=prefix), block_ms=500)
    seen: list[tuple[str, dict[str, Any]]] = []
    dropped: list[str] = []
    feed.add(lambda event_id, doc: seen.append((event_id, doc)))
    feed.add(failing_listener)  # a listener that fails does not stop the others
    gone = feed.add(lambda event_id, doc: dropped.append(event_id))
    feed.start()
    try:
        await asyncio.wait_for(feed.ready.wait(), 10)
        await writer.append_slot(2, [event(2), event(2, 1)])
        await until_true(lambda: len(seen) == 2, "the first two events")
        feed.remove(gone)

        before = await connection_of(redis_client, name)
        assert before is not None
        await redis_client.client_kill_filter(_id=str(before))
        await writer.append_slot(3, [event(3), event(3, 1)])  # while the feed reconnects
        await writer.append_slot(5, [event(5)])
        await until_true(lambda: len(seen) == 5, "the events after the reset")
        after = await connection_of(redis_client, name)
        assert after is not None and after != before  # the feed really read over a new connection
        if not client_retries:
            assert feed.failures >= 1  # the feed's own recovery, not the client's retry, carried it over
    finally:
        await feed.stop()
        await feed_client.aclose()
    assert [event_id for event_id, _ in seen] == ["2-0", "2-1", "3-0", "3-1", "5-0"]
    assert [doc for _, doc in seen] == [e.to_json() for e in (event(2), event(2, 1), event(3), event(3, 1), event(5))]
    assert dropped == ["2-0", "2-1"] and feed.position == "5-0" and feed.delivered == 5
