"""One caller's filters never stop another's stream: the process's one upstream subscription asks the node
only for what it accepts (the filter budget, docs/api.md gRPC), and a request the node refuses anyway
ends only the stream that asked for it (through the gateway's server, the devnode's geyser server and
the generated client)."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import grpc
from solders.keypair import Keypair
from solders.pubkey import Pubkey

from devnode.node import Devnode
from tests.grpc.client import Subscription, kind
from tests.grpc.conftest import GeyserClient, StreamFactory

#: What "promptly" means for a slots stream while others are refused (slots come every 100 ms here).
MAX_SLOT_GAP_S = 2.0


def watched(pb2: Any, count: int) -> tuple[dict[str, Any], list[str]]:
    """``count`` account filters, one new key each: (the request's ``accounts``, the keys)."""
    keys = [str(Keypair().pubkey()) for _ in range(count)]
    return {f"a{n}": pb2.SubscribeRequestFilterAccounts(account=[key]) for n, key in enumerate(keys)}, keys


async def longest_slot_gap(sub: Subscription, seconds: float) -> float:
    """Read ``sub`` for ``seconds``: the longest wait for a slot update (an update that never comes fails the
    read after WAIT_S)."""
    loop = asyncio.get_running_loop()
    start = last = loop.time()
    gap = 0.0
    while loop.time() - start < seconds:
        update = await sub.read()
        if kind(update) == "slot":
            now = loop.time()
            gap, last = max(gap, now - last), now
    return gap


async def test_two_greedy_streams_of_one_account_never_stop_another_accounts_slots(
    geyser: GeyserClient, serve_stream: StreamFactory, db: asyncpg.Connection
) -> None:
    pb2 = geyser.pb2
    async with serve_stream() as stream:
        _, greedy_key = await stream.customer(db, 10_000)
        _, other_key = await stream.customer(db, 10_000)
        async with grpc.aio.insecure_channel(stream.address) as channel:
            slots = Subscription(geyser, channel, other_key)
            await slots.send(slots={"s": pb2.SubscribeRequestFilterSlots()})
            await slots.ping()
            watching = asyncio.create_task(longest_slot_gap(slots, 3.0))
            greedy = [Subscription(geyser, channel, greedy_key) for _ in range(2)]
            for sub in greedy:
                await sub.send(accounts=watched(pb2, 40)[0])
            errors = await asyncio.gather(*(sub.error() for sub in greedy))
            assert await watching < MAX_SLOT_GAP_S
    for error in errors:  # 40 is a valid request (64 per kind), but more than an account's share (16)
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error
        assert "40 distinct `accounts` filters" in error.details() and "at most 16 per account" in error.details()


async def test_the_budget_gives_each_account_a_share_and_checks_a_bigger_replacement_like_a_new_stream(
    geyser: GeyserClient, serve_stream: StreamFactory, db: asyncpg.Connection
) -> None:
    pb2 = geyser.pb2
    # A node that takes 8 filters of a kind: 4 per account. Without a replay log: with one, the node is asked
    # for its whole feed and the process counts only keyless filters (tests/grpc/test_hostile.py).
    async with serve_stream(upstream_grpc_max_filters=8, grpc_account_filter_share=0.5, grpc_replay_slots=0) as stream:
        keys = [(await stream.customer(db, 10_000))[1] for _ in range(3)]
        async with grpc.aio.insecure_channel(stream.address) as channel:
            first, shared = Subscription(geyser, channel, keys[0]), Subscription(geyser, channel, keys[0])
            four, _ = watched(pb2, 4)
            for sub in (first, shared):  # the same four filters on two streams count once
                await sub.send(accounts=four)
                await sub.ping()
            other = Subscription(geyser, channel, keys[1])
            await other.send(accounts=watched(pb2, 4)[0])  # another account's share: the budget is full
            await other.ping()

            more = Subscription(geyser, channel, keys[0])  # one more for the first account
            await more.send(accounts=watched(pb2, 1)[0])
            error = await more.error()
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "5 distinct `accounts` filters (at most 4 per account" in error.details()

            third = Subscription(geyser, channel, keys[2])  # a third account: the process's budget is used up
            await third.send(accounts=watched(pb2, 1)[0])
            error = await third.error()
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "this server's streams would use 9 distinct `accounts` filters (at most 8" in error.details()
            served = Subscription(geyser, channel, keys[2])  # its slots and transactions are another matter
            await served.send(
                slots={"s": pb2.SubscribeRequestFilterSlots()},
                transactions={"t": pb2.SubscribeRequestFilterTransactions(vote=False)},
            )
            await served.ping()
            await served.until(lambda u: kind(u) == "slot")

            await shared.send(accounts={**four, **watched(pb2, 1)[0]})  # a bigger replacement is checked too
            error = await shared.error()
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "5 distinct `accounts`" in error.details()
            await first.ping()  # the streams within their share go on
            await other.ping()
            assert stream.server.budget.used() == (8, 1)


async def test_a_union_the_node_refuses_ends_only_the_stream_that_made_it(
    geyser: GeyserClient, serve_stream: StreamFactory, db: asyncpg.Connection, devnode: Devnode
) -> None:
    pb2 = geyser.pb2
    # Settings that promise more than the devnode takes (64 per kind): the node refuses the union of 80. Without
    # a replay log: with one, the node is asked for its whole feed, never for the streams' filters.
    async with serve_stream(
        upstream_grpc_max_filters=1_000, grpc_account_filter_share=1.0, grpc_replay_slots=0
    ) as stream:
        _, greedy_key = await stream.customer(db, 10_000)
        _, other_key = await stream.customer(db, 10_000)
        async with grpc.aio.insecure_channel(stream.address) as channel:
            slots = Subscription(geyser, channel, other_key)
            await slots.send(slots={"s": pb2.SubscribeRequestFilterSlots()})
            await slots.ping()
            first, second = Subscription(geyser, channel, greedy_key), Subscription(geyser, channel, greedy_key)
            filters, first_keys = watched(pb2, 40)
            await first.send(accounts=filters)
            await first.ping()
            watching = asyncio.create_task(longest_slot_gap(slots, 3.0))
            await second.send(accounts=watched(pb2, 40)[0])
            error = await second.error()
            assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "the node's geyser endpoint refused this stream's filters" in error.details()
            assert "too many `accounts` filters: 80 (max 64)" in error.details()
            assert await watching < MAX_SLOT_GAP_S
            await first.ping()  # live upstream again
            devnode.chain.airdrop(Pubkey.from_string(first_keys[7]), 1_000_000)
            update = await first.until(lambda u: kind(u) == "account")
            assert list(update.filters) == ["a7"]
