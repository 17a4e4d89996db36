"""A stream is billed for the time it covers (docs/api.md, gRPC prices): an account's new stream counts as held
what its ended ones held past their last paid interval, so an account pays for the stream time it held, summed
over its reconnects, however it reconnects and on whichever server process; a ``from_slot`` replay counts from
the replayed slot; an account opens a bounded number of streams a minute. Real grpcio client with the
generated stubs, the server in this process, real PostgreSQL and Redis, the devnode's geyser."""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

import asyncpg
import grpc

from tests.grpc.client import Subscription, kind
from tests.grpc.conftest import GeyserClient, StreamFactory
from tests.grpc.test_billing import usage


async def test_reconnecting_does_not_restart_the_first_interval(
    geyser: GeyserClient, serve_stream: StreamFactory, db: asyncpg.Connection
) -> None:
    """Streams of 1 s each, back to back, over several 3 s intervals: each is shorter than an interval, so
    billed from its own open none would ever pay one; their held time, summed, pays intervals."""
    async with serve_stream(grpc_billing_interval_s=3.0) as stream:
        pubkey, key = await stream.customer(db, 10_000)
        async with grpc.aio.insecure_channel(stream.address) as channel:
            for _ in range(7):
                sub = Subscription(geyser, channel, key)
                await sub.send(slots={"s": geyser.pb2.SubscribeRequestFilterSlots()})
                await sub.ping()
                await asyncio.sleep(1.0)
                sub.call.cancel()
        rows = await usage(db, stream, pubkey)
    assert rows.count(("grpc:Subscribe", 1)) == 7
    assert rows.count(("grpc:Subscribe:interval", 60)) >= 1, rows


async def test_overlapping_short_streams_pay_at_the_accounts_ticks(
    geyser: GeyserClient, serve_stream: StreamFactory, db: asyncpg.Connection
) -> None:
    """Streams of about 3 s, each closed just after the next one is live (so one is always open), over 3 s
    intervals: none need live a whole interval, yet their held time, summed, pays intervals."""
    async with serve_stream(grpc_billing_interval_s=3.0) as stream:
        pubkey, key = await stream.customer(db, 10_000)
        async with grpc.aio.insecure_channel(stream.address) as channel:
            open_now: list[Subscription] = []
            for _ in range(6):
                sub = Subscription(geyser, channel, key)
                await sub.send(slots={"s": geyser.pb2.SubscribeRequestFilterSlots()})
                await sub.ping()
                open_now.append(sub)
                if len(open_now) == 2:
                    open_now.pop(0).call.cancel()  # the one before, once this one is live
                await asyncio.sleep(1.5)
            for sub in open_now:
                sub.call.cancel()
        rows = await usage(db, stream, pubkey)
    assert rows.count(("grpc:Subscribe", 1)) == 6
    assert rows.count(("grpc:Subscribe:interval", 60)) >= 1, rows


async def test_reconnecting_around_each_tick_pays_for_the_time_held(
    geyser: GeyserClient, serve_stream: StreamFactory, db: asyncpg.Connection
) -> None:
    """Issue 49's client: it closes its stream just before each point where one stream held from its first open
    would pay its next interval, and reopens just after. It pays for the stream time it held, summed over its
    reconnects (at most one interval less: what its last stream held is prepaid or still carried), where
    billing each stream from the account's interval ticks charged none."""
    interval, cycles, margin = 2.0, 6, 0.2
    async with serve_stream(grpc_billing_interval_s=interval) as stream:
        pubkey, key = await stream.customer(db, 100_000)
        held = 0.0  # measured inside what the server counts: from the pong to the close
        async with grpc.aio.insecure_channel(stream.address) as channel:
            began = time.monotonic()  # before the first open: any tick of the account's is after it
            for n in range(cycles):
                sub = Subscription(geyser, channel, key)
                await sub.send(slots={"s": geyser.pb2.SubscribeRequestFilterSlots()})
                await sub.ping()
                live = time.monotonic()
                await asyncio.sleep(max(0.0, began + (n + 1) * interval - margin - live))
                held += time.monotonic() - live
                sub.call.cancel()
                await asyncio.sleep(max(0.0, began + (n + 1) * interval + margin - time.monotonic()))
        rows = await usage(db, stream, pubkey)
    intervals = rows.count(("grpc:Subscribe:interval", 60))
    print(f"\n{cycles} streams held {held:.2f} s in all over {interval:g} s intervals: {intervals} intervals paid")
    assert rows.count(("grpc:Subscribe", 1)) == cycles
    assert intervals >= math.floor(held / interval) - 1 >= 2, (held, rows)


async def test_the_time_held_is_summed_over_server_processes(
    geyser: GeyserClient, serve_stream: StreamFactory, db: asyncpg.Connection
) -> None:
    """Streams of 1.2 s over 2 s intervals, each on the other of two server processes sharing the stores: none
    lives an interval, and neither process sees more than every other one; the account pays for their sum."""
    interval, cycles, each = 2.0, 6, 1.2
    async with (
        serve_stream(grpc_billing_interval_s=interval) as first,
        serve_stream(grpc_billing_interval_s=interval) as second,
    ):
        pubkey, key = await first.customer(db, 100_000)
        held = 0.0
        for n in range(cycles):
            server = (first, second)[n % 2]
            async with grpc.aio.insecure_channel(server.address) as channel:
                sub = Subscription(geyser, channel, key)
                await sub.send(slots={"s": geyser.pb2.SubscribeRequestFilterSlots()})
                await sub.ping()
                live = time.monotonic()
                await asyncio.sleep(each)
                held += time.monotonic() - live
                sub.call.cancel()
                await asyncio.sleep(0.1)
        await first.server.meter.flush()
        rows = await usage(db, second, pubkey)
    intervals = rows.count(("grpc:Subscribe:interval", 60))
    assert rows.count(("grpc:Subscribe", 1)) == cycles
    assert intervals >= math.floor(held / interval) - 1 >= 2, (held, rows)


async def test_a_replayed_span_is_stream_time(
    geyser: GeyserClient, serve_stream: StreamFactory, db: asyncpg.Connection
) -> None:
    """A 3 s stream that replays from 6 s back covers 9 s: one 5 s interval charged (none if billed from its open)."""
    pb2 = geyser.pb2
    async with serve_stream(grpc_billing_interval_s=5.0) as stream:
        _, watcher_key = await stream.customer(db, 10_000)
        pubkey, key = await stream.customer(db, 10_000)
        async with grpc.aio.insecure_channel(stream.address) as channel:
            watcher = Subscription(geyser, channel, watcher_key)
            await watcher.send(slots={"s": pb2.SubscribeRequestFilterSlots()})
            log = stream.server.replay_log
            assert log is not None

            def held(update: Any) -> bool:  # a slot the replay log holds (it holds from its first boundary on)
                oldest = log.oldest()
                return kind(update) == "slot" and oldest is not None and update.slot.slot >= oldest

            first = (await watcher.until(held)).slot.slot
            await asyncio.sleep(6.0)
            replayed = Subscription(geyser, channel, key)
            await replayed.send(slots={"s": pb2.SubscribeRequestFilterSlots()}, from_slot=first)
            await replayed.ping()
            await asyncio.sleep(3.0)
            replayed.call.cancel()
        rows = await usage(db, stream, pubkey)
    assert rows == [("grpc:Subscribe", 1), ("grpc:Subscribe:interval", 60)], rows


async def test_stream_opens_per_account_are_rate_limited_and_the_refused_one_is_not_charged(
    geyser: GeyserClient, serve_stream: StreamFactory, db: asyncpg.Connection
) -> None:
    async with serve_stream(grpc_max_stream_opens_per_minute=3) as stream:
        pubkey, key = await stream.customer(db, 100)
        _, other_key = await stream.customer(db, 100)
        async with grpc.aio.insecure_channel(stream.address) as channel:
            for _ in range(3):
                sub = Subscription(geyser, channel, key)
                await sub.send(slots={"s": geyser.pb2.SubscribeRequestFilterSlots()})
                await sub.ping()
                sub.call.cancel()
            refused = Subscription(geyser, channel, key)
            await refused.send(slots={"s": geyser.pb2.SubscribeRequestFilterSlots()})
            error = await refused.error()
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error
            assert "stream open rate exceeded" in (error.details() or "") and "at most 3 a minute" in error.details()
            other = Subscription(geyser, channel, other_key)  # another account's opens are its own
            await other.send(slots={"s": geyser.pb2.SubscribeRequestFilterSlots()})
            await other.ping()
        assert await usage(db, stream, pubkey) == [("grpc:Subscribe", 1)] * 3
        assert stream.server.meter.remaining(pubkey) == 97
