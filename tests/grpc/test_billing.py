"""What the gRPC stream charges: 1 credit per unary call and per established Subscribe, then 60 credits
at the start of each further interval (shortened here) while the stream is open, nothing once the
client is gone; a stream whose account cannot pay the next interval ends with a clear status."""

from __future__ import annotations

import asyncio
import json

import asyncpg
import grpc

from gateway.limits.rules import Allowed
from gateway.limits.slices import LocalShards, SlicedLimiter
from tests.grpc.client import Subscription, eventually
from tests.grpc.conftest import GeyserClient, RunningStream, StreamFactory

INTERVAL_S = 0.4


async def usage(db: asyncpg.Connection, stream: RunningStream, pubkey: str) -> list[tuple[str, int]]:
    """The account's usage rows in order, once the server's meter has settled them."""
    await stream.server.meter.flush()
    rows = await db.fetch("SELECT method, credits FROM usage_history WHERE pubkey = $1 ORDER BY id", pubkey)
    return [(row["method"], row["credits"]) for row in rows]


async def test_a_stream_pays_1_then_60_per_further_interval_and_stops_paying_when_the_client_goes(
    geyser: GeyserClient, serve_stream: StreamFactory, db: asyncpg.Connection
) -> None:
    async with serve_stream(grpc_billing_interval_s=INTERVAL_S) as stream:
        pubkey, key = await stream.customer(db, 10_000)
        async with grpc.aio.insecure_channel(stream.address) as channel:
            sub = Subscription(geyser, channel, key)
            await sub.send(slots={"s": geyser.pb2.SubscribeRequestFilterSlots()})
            await sub.ping()
            rows = await usage(db, stream, pubkey)
            assert rows == [("grpc:Subscribe", 1), *_intervals(len(rows) - 1)]  # paid when established

            async def two_intervals() -> bool:
                return len(await usage(db, stream, pubkey)) >= 3

            await eventually(two_intervals, "two intervals charged")
            rows = await usage(db, stream, pubkey)
            assert rows[:3] == [("grpc:Subscribe", 1), *_intervals(2)], rows

            sub.call.cancel()  # the client goes away
            await eventually(lambda: not stream.server.fanout.members, "the server saw the client go")
            charged = await usage(db, stream, pubkey)
            await asyncio.sleep(3 * INTERVAL_S)
            assert await usage(db, stream, pubkey) == charged  # nothing after the stream ended
            assert charged[1:] == _intervals(len(charged) - 1)


def _intervals(count: int) -> list[tuple[str, int]]:
    return [("grpc:Subscribe:interval", 60)] * count


async def test_a_stream_that_cannot_pay_its_next_interval_ends_resource_exhausted(
    geyser: GeyserClient, serve_stream: StreamFactory, db: asyncpg.Connection
) -> None:
    async with serve_stream(grpc_billing_interval_s=INTERVAL_S) as stream:
        pubkey, key = await stream.customer(db, 1 + 60 + 30)  # the stream, one interval, half of the next
        async with grpc.aio.insecure_channel(stream.address) as channel:
            sub = Subscription(geyser, channel, key)
            await sub.send(slots={"s": geyser.pb2.SubscribeRequestFilterSlots()})
            error = await sub.error()
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "insufficient credits (-32010)" in error.details() and "costs 60 credits" in error.details()
        assert await usage(db, stream, pubkey) == [("grpc:Subscribe", 1), *_intervals(1)]
        assert stream.server.meter.remaining(pubkey) == 30


async def test_each_unary_call_costs_1_credit_and_answers_from_the_chain(
    geyser: GeyserClient, stream: RunningStream, db: asyncpg.Connection
) -> None:
    pubkey, key = await stream.customer(db, 1_000)
    pb2 = geyser.pb2
    metadata = (("x-token", key),)
    meter = stream.server.meter
    async with grpc.aio.insecure_channel(stream.address) as channel:
        stub = geyser.grpc.GeyserStub(channel)
        slot = (await stub.GetSlot(pb2.GetSlotRequest(), metadata=metadata)).slot
        assert slot > 0
        latest = await stub.GetLatestBlockhash(
            pb2.GetLatestBlockhashRequest(commitment=pb2.FINALIZED), metadata=metadata
        )
        calls = [
            (stub.GetSlot, pb2.GetSlotRequest(commitment=pb2.CONFIRMED)),
            (stub.GetBlockHeight, pb2.GetBlockHeightRequest()),
            (stub.GetLatestBlockhash, pb2.GetLatestBlockhashRequest()),
            (stub.IsBlockhashValid, pb2.IsBlockhashValidRequest(blockhash=latest.blockhash)),
            (stub.GetVersion, pb2.GetVersionRequest()),
            (stub.Ping, pb2.PingRequest(count=42)),
        ]
        answers = []
        for method, request in calls:
            before = meter.remaining(pubkey)
            answers.append(await method(request, metadata=metadata))
            assert before is not None and meter.remaining(pubkey) == before - 1, method
    slot_confirmed, height, blockhash, valid, version, pong = answers
    assert slot_confirmed.slot >= slot - 1 and height.block_height > 0
    assert blockhash.last_valid_block_height > height.block_height and len(blockhash.blockhash) >= 32
    assert valid.valid and valid.slot >= slot
    assert json.loads(version.version)["version"]["package"] == "devnode-geyser"
    assert pong.count == 42
    methods = [method for method, _ in await usage(db, stream, pubkey)]
    called = ["GetSlot", "GetLatestBlockhash", "GetSlot", "GetBlockHeight", "GetLatestBlockhash"]
    called += ["IsBlockhashValid", "GetVersion", "Ping"]
    assert methods == [f"grpc:{name}" for name in called]
    assert await usage(db, stream, pubkey) == [(method, 1) for method in methods]


async def test_unary_calls_share_the_accounts_whole_rate_with_the_replicas_through_its_shard(
    geyser: GeyserClient, serve_stream: StreamFactory, db: asyncpg.Connection
) -> None:
    """With account shards, a gRPC server's unary calls spend the same rate as the ingress replicas'
    calls (in-process shards stand for the actors here; tests/limits/test_shard_actors.py has the real
    ones): a replica that took the whole burst leaves none for gRPC, and a gRPC client alone gets the
    whole burst, not a share of it."""
    shards = LocalShards(1)
    replica = SlicedLimiter(shards, 5, 8)  # an ingress replica of the same service
    async with serve_stream(shards=shards, rate_limit_rps=5) as stream:
        pubkey, key = await stream.customer(db, 1_000)
        metadata = (("x-token", key),)
        async with grpc.aio.insecure_channel(stream.address) as channel:
            stub = geyser.grpc.GeyserStub(channel)

            async def outcomes(calls: int) -> list[str]:
                seen = []
                for _ in range(calls):
                    try:
                        await stub.GetSlot(geyser.pb2.GetSlotRequest(), metadata=metadata)
                        seen.append("ok")
                    except grpc.aio.AioRpcError as error:
                        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error
                        seen.append("rate")
                return seen

            alone = await outcomes(8)
            assert 5 <= alone.count("ok") <= 6 and alone[-1] == "rate", alone  # the burst, and a refill at most
            await asyncio.sleep(1.5)  # refilled, and the server's unused slice given back
            loop = asyncio.get_running_loop()
            taken = 0
            for _ in range(5):
                pending = replica.ready(pubkey, 1, loop.time(), rps=5, concurrency=8)
                if pending is not None:
                    await pending
                taken += isinstance(replica.take(pubkey, loop.time(), 0.0, 5), Allowed)
            assert taken == 5
            after = await outcomes(3)
            assert after.count("ok") <= 1, after  # nothing left but what refilled meanwhile
    await replica.close()
