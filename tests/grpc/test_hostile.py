"""A hostile SubscribeRequest is bounded before it is decoded: refused INVALID_ARGUMENT at once, its
stream's credit refunded, and the other streams of the process never notice (docs/api.md, gRPC limits).
A stream refused before any of its filters were accepted keeps no credit. Real grpcio client with the
generated stubs, the server in this process, real PostgreSQL and Redis, the devnode's geyser."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import grpc
from solders.pubkey import Pubkey

from tests.grpc.client import Subscription, kind
from tests.grpc.conftest import GeyserClient, RunningStream, StreamFactory
from tests.grpc.test_fairness import watched


async def records(db: asyncpg.Connection, stream: RunningStream, pubkey: str) -> list[tuple[str, int, bool]]:
    """The account's usage rows (method, credits charged, refunded) once the server's meter settled them."""
    await stream.server.meter.flush()
    query = "SELECT method, credits, refunded FROM usage_history WHERE pubkey = $1 ORDER BY id"
    return [(r["method"], r["credits"], r["refunded"]) for r in await db.fetch(query, pubkey)]


async def slots_flowing(sub: Subscription, seen: list[int]) -> None:
    """Read ``sub``'s slot updates into ``seen`` until cancelled."""
    while True:
        update = await sub.read()
        if kind(update) == "slot":
            seen.append(update.slot.slot)


async def test_a_300000_character_key_is_refused_at_once_not_charged_and_other_streams_keep_flowing(
    geyser: GeyserClient, stream: RunningStream, db: asyncpg.Connection
) -> None:
    pb2 = geyser.pb2
    hostile_pubkey, hostile_key = await stream.customer(db, 100)
    _, other_key = await stream.customer(db, 100)
    async with grpc.aio.insecure_channel(stream.address) as channel:
        other = Subscription(geyser, channel, other_key)
        await other.send(slots={"s": pb2.SubscribeRequestFilterSlots()})
        await other.until(lambda u: kind(u) == "slot")
        seen: list[int] = []
        reader = asyncio.create_task(slots_flowing(other, seen))
        try:
            hostile = Subscription(geyser, channel, hostile_key)
            await hostile.send(accounts={"a": pb2.SubscribeRequestFilterAccounts(account=["A" * 300_000])})
            error = await hostile.error()  # within WAIT_S: the old decoder took tens of seconds here
            assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error
            assert "300000 characters" in (error.details() or "")
            assert "expected a base58 public key of 32 bytes" in (error.details() or "")
            before = len(seen)
            while len(seen) < before + 3:  # and it still flows after
                await asyncio.sleep(0.05)
                assert not reader.done(), reader
        finally:
            reader.cancel()
    assert await records(db, stream, hostile_pubkey) == [("grpc:Subscribe", 0, True)]  # a recorded refund
    assert stream.server.meter.remaining(hostile_pubkey) == 100


async def test_past_the_request_limits_is_invalid_argument_and_past_the_transport_is_refused_unread(
    geyser: GeyserClient, stream: RunningStream, db: asyncpg.Connection
) -> None:
    pb2 = geyser.pb2
    key44 = "1" * 32
    cases = [
        ({"transactions": {"t": pb2.SubscribeRequestFilterTransactions(signature="2" * 100)}}, "signature"),
        (
            {
                "accounts": {
                    "m": pb2.SubscribeRequestFilterAccounts(
                        filters=[
                            pb2.SubscribeRequestFilterAccountsFilter(
                                memcmp=pb2.SubscribeRequestFilterAccountsFilterMemcmp(offset=0, base58="2" * 200)
                            )
                        ]
                    )
                }
            },
            "memcmp data too large: 200 base58 characters",
        ),
        (
            {"accounts": {f"a{i}": pb2.SubscribeRequestFilterAccounts(account=[key44] * 4_000) for i in range(3)}},
            "too many keys in the request: 12000",
        ),
        (
            {
                "accounts": {"a": pb2.SubscribeRequestFilterAccounts(owner=["x" * 600_000])},
            },
            "request too large",
        ),
    ]
    pubkey, key = await stream.customer(db, 100)
    async with grpc.aio.insecure_channel(stream.address) as channel:
        for fields, wanted in cases:
            sub = Subscription(geyser, channel, key)
            await sub.send(**fields)
            error = await sub.error()
            assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, (wanted, error)
            assert wanted in (error.details() or ""), error
        sub = Subscription(geyser, channel, key)  # past what the transport takes: never parsed
        await sub.send(accounts={"a": pb2.SubscribeRequestFilterAccounts(owner=["x" * 1_100_000])})
        error = await sub.error()
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error
    assert stream.server.meter.remaining(pubkey) == 100
    assert set(await records(db, stream, pubkey)) == {("grpc:Subscribe", 0, True)}


async def test_a_stream_refused_by_the_filter_budget_keeps_no_credit_and_an_admitted_one_pays(
    geyser: GeyserClient, serve_stream: StreamFactory, db: asyncpg.Connection
) -> None:
    pb2 = geyser.pb2
    async with serve_stream(upstream_grpc_max_filters=2, grpc_account_filter_share=0.5) as stream:
        pubkey, key = await stream.customer(db, 100)
        keys = ["So11111111111111111111111111111111111111112", "11111111111111111111111111111111"]
        async with grpc.aio.insecure_channel(stream.address) as channel:
            sub = Subscription(geyser, channel, key)
            await sub.send(
                accounts={f"a{i}": pb2.SubscribeRequestFilterAccounts(account=[k]) for i, k in enumerate(keys)}
            )
            error = await sub.error()
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "filter budget" in (error.details() or "")
            assert stream.server.meter.remaining(pubkey) == 100
            admitted = Subscription(geyser, channel, key)
            await admitted.send(slots={"s": pb2.SubscribeRequestFilterSlots()})
            await admitted.ping()
            admitted.call.cancel()
        assert await records(db, stream, pubkey) == [("grpc:Subscribe", 0, True), ("grpc:Subscribe", 1, False)]
        assert stream.server.meter.remaining(pubkey) == 99


async def test_a_stream_changing_its_filters_too_fast_is_closed_and_another_stream_keeps_flowing(
    geyser: GeyserClient, stream: RunningStream, db: asyncpg.Connection
) -> None:
    pb2 = geyser.pb2
    pubkey, key = await stream.customer(db, 100)
    _, other_key = await stream.customer(db, 100)
    keys = ["So11111111111111111111111111111111111111112", "11111111111111111111111111111111"]
    async with grpc.aio.insecure_channel(stream.address) as channel:
        other = Subscription(geyser, channel, other_key)
        await other.send(slots={"s": pb2.SubscribeRequestFilterSlots()})
        await other.until(lambda u: kind(u) == "slot")
        churner = Subscription(geyser, channel, key)
        # 11 at once: one past the burst of 10 (written well within the 1 s that refills one; no more, since a
        # write after the server closed the stream would fail on the client's side instead)
        for i in range(11):
            await churner.send(accounts={"a": pb2.SubscribeRequestFilterAccounts(account=[keys[i % 2]])})
        error = await churner.error()
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error
        assert "filter change rate exceeded: at most 10 SubscribeRequests at once" in (error.details() or "")
        await other.until(lambda u: kind(u) == "slot")
    assert await records(db, stream, pubkey) == [("grpc:Subscribe", 1, False)]  # it was served: charged


async def test_with_the_whole_feed_a_few_accounts_keyed_filters_do_not_take_the_budget_keyless_ones_do(
    geyser: GeyserClient, serve_stream: StreamFactory, db: asyncpg.Connection
) -> None:
    """With the replay log (the default) the node is asked for its whole feed: keyed filters are index lookups and
    count only in their account's share, so two accounts at their share no longer refuse a third; filters without
    keys, tried on every update, still count in the process's limit."""
    pb2 = geyser.pb2

    def keyless(count: int, base: int) -> dict[str, Any]:
        sizes = [pb2.SubscribeRequestFilterAccountsFilter(datasize=base + n) for n in range(count)]
        return {f"d{n}": pb2.SubscribeRequestFilterAccounts(filters=[size]) for n, size in enumerate(sizes)}

    async with serve_stream(upstream_grpc_max_filters=8, grpc_account_filter_share=0.5) as stream:
        keys = [(await stream.customer(db, 10_000))[1] for _ in range(6)]
        async with grpc.aio.insecure_channel(stream.address) as channel:
            held = []
            for key in keys[:2]:  # two accounts, each at its share (4) of keyed filters: 8, the node's number
                held.append(Subscription(geyser, channel, key))
                await held[-1].send(accounts=watched(pb2, 4)[0])
                await held[-1].ping()
            third = Subscription(geyser, channel, keys[2])  # was refused: "this server's streams would use 12"
            await third.send(accounts=watched(pb2, 4)[0])
            await third.ping()

            for n, key in enumerate(keys[3:5]):  # two more accounts, 4 keyless filters each: 8 in all
                held.append(Subscription(geyser, channel, key))
                await held[-1].send(accounts=keyless(4, 100 * n + 1))
                await held[-1].ping()
            refused = Subscription(geyser, channel, keys[5])  # a sixth account, within its share: one keyless more
            await refused.send(accounts=keyless(1, 1_000))
            error = await refused.error()
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error
            assert "would use 9 distinct `accounts` filters without keys (at most 8" in (error.details() or "")
            for sub in (*held, third):  # the others go on
                await sub.ping()


async def test_an_accounts_filter_changes_are_bounded_in_keys_over_its_streams_reopened_ones_included(
    geyser: GeyserClient, stream: RunningStream, db: asyncpg.Connection
) -> None:
    """The index work of a change grows with its keys: an account re-indexes at most 20,000 keys at once over
    all its streams (then 2,000 a second), so spreading large changes over streams, or reopening a refused
    stream for a fresh burst, buys nothing; another account's slots keep flowing."""
    pb2 = geyser.pb2
    pubkey, key = await stream.customer(db, 1_000)
    _, other_key = await stream.customer(db, 100)

    def many(n: int = 10_000) -> Any:
        return pb2.SubscribeRequestFilterAccounts(account=[str(Pubkey.new_unique()) for _ in range(n)])

    async with grpc.aio.insecure_channel(stream.address) as channel:
        other = Subscription(geyser, channel, other_key)
        await other.send(slots={"s": pb2.SubscribeRequestFilterSlots()})
        await other.until(lambda u: kind(u) == "slot")
        first, second = Subscription(geyser, channel, key), Subscription(geyser, channel, key)
        await first.send(accounts={"a": many()})  # 10,000 keys set
        await first.ping()
        await second.send(accounts={"a": many()})  # 10,000 more: the account's burst is spent
        await second.ping()
        await first.send(accounts={"a": many()})  # would drop 10,000 and set 10,000
        error = await first.error()
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error
        assert "filter key rate exceeded" in (error.details() or "")
        reopened = Subscription(geyser, channel, key)  # a new stream gets no fresh burst
        await reopened.send(accounts={"a": many()})
        error = await reopened.error()
        assert "filter key rate exceeded" in (error.details() or "")
        small = Subscription(geyser, channel, key)  # small changes still pass while the bucket refills
        await small.send(accounts={"a": many(10)})
        await small.ping()
        await other.until(lambda u: kind(u) == "slot")
    charged = [r for r in await records(db, stream, pubkey) if not r[2]]
    assert len(charged) >= 3  # the streams that got their filters in were served and charged
