"""A resume the replay log cannot serve (``from_slot`` older than it holds) ends ``OUT_OF_RANGE`` having delivered
nothing: it pays no stream time and hands none to the account's next stream (issue 83). Real grpcio client with
the generated stubs, the server in this process, real PostgreSQL and Redis, the devnode's geyser."""

from __future__ import annotations

import time

import asyncpg
import grpc
import redis.asyncio as aioredis

from tests.grpc.client import Subscription, eventually
from tests.grpc.conftest import GeyserClient, StreamFactory
from tests.grpc.test_billing import usage

INTERVAL_S = 2.0


async def carried(redis_url: str, pubkey: str) -> float:
    """Seconds of the account's stream time held for its next stream (gateway.grpc.store's counter), read
    without taking it."""
    client = aioredis.Redis.from_url(redis_url)
    try:
        micros = await client.get(f"grpc:carry:{pubkey}")
    finally:
        await client.aclose()
    return 0.0 if micros is None else int(micros) / 1e6


async def test_a_refused_resume_pays_no_stream_time_and_hands_none_on(
    geyser: GeyserClient, serve_stream: StreamFactory, db: asyncpg.Connection, redis_url: str
) -> None:
    pb2 = geyser.pb2
    async with serve_stream(grpc_billing_interval_s=INTERVAL_S) as stream:
        log = stream.server.replay_log
        assert log is not None
        clocks = stream.server.service.deps.clocks

        def held_long() -> bool:  # the log's first slot came more than two intervals ago
            first = log.received_at(1)
            return first is not None and time.monotonic() - first > 2 * INTERVAL_S

        # A replay from slot 1 would then cover more than two intervals, were it served (it never is: slot 1 is
        # older than the log): the bug billed and handed on that span.
        await eventually(held_long, "the replay log holds slots from more than two intervals ago")
        pubkey, key = await stream.customer(db, 10_000)
        async with grpc.aio.insecure_channel(stream.address) as channel:
            for _ in range(3):
                sub = Subscription(geyser, channel, key)
                await sub.send(slots={"s": pb2.SubscribeRequestFilterSlots()}, from_slot=1)
                error = await sub.error()
                assert error.code() == grpc.StatusCode.OUT_OF_RANGE, error
            await clocks.stop()  # the ended streams' carries, if any, have reached Redis
            assert await usage(db, stream, pubkey) == [("grpc:Subscribe", 0)] * 3  # each open refunded, no interval
            assert await carried(redis_url, pubkey) == 0.0

            # The next plain stream counts its own time only: what it is billed and hands on is no more than
            # the time it was open, measured around it from outside.
            began = time.monotonic()
            plain = Subscription(geyser, channel, key)
            await plain.send(slots={"s": pb2.SubscribeRequestFilterSlots()})
            await plain.ping()
            plain.call.cancel()
            await eventually(lambda: not stream.server.fanout.members, "the server saw the client go")
            ended = time.monotonic()
        await clocks.stop()
        rows = await usage(db, stream, pubkey)
        assert rows[:4] == [("grpc:Subscribe", 0)] * 3 + [("grpc:Subscribe", 1)], rows
        intervals = rows[4:]
        assert intervals == [("grpc:Subscribe:interval", 60)] * len(intervals), rows
        accounted = len(intervals) * INTERVAL_S + await carried(redis_url, pubkey)
        assert accounted <= ended - began, (accounted, ended - began, rows)
