"""``from_slot`` through the gateway's gRPC server with the generated client, on the devnode executing real
transfers: a client that went away resumes and gets what it missed once, in the feed's order, then the live
stream, exactly as a stream that never left got it; a slot older than the replay log is OUT_OF_RANGE naming
the oldest one; a replayed stream is billed as a live one."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import asyncpg
import grpc
from solana.rpc.async_api import AsyncClient
from solders.keypair import Keypair
from solders.pubkey import Pubkey
from solders.signature import Signature
from solders.system_program import TransferParams, transfer

from devnode.node import Devnode
from tests.chain import airdrop, send_sol, submit
from tests.grpc.client import WAIT_S, Subscription, eventually, kind
from tests.grpc.conftest import GeyserClient, StreamFactory
from tests.grpc.test_billing import usage

PROCESSED, CONFIRMED = 0, 1
#: A queue this short makes a replay of a few slots wait for the client several times, so updates keep
#: arriving while it is sent: the hand-over to live happens in the middle of the feed.
SHORT_QUEUE = 20
#: A bound on the resumed stream's test (about 3 s when it passes), tighter than the one every coroutine test
#: has (tests/async_bound.py, 540 s): a hang fails sooner, its server unwinding and giving its seats back.
RUN_S = 120.0


def slot_of(update: Any) -> int:
    return int(getattr(update, kind(update)).slot)


def feed(updates: list[Any]) -> list[Any]:
    return [u for u in updates if kind(u) not in ("ping", "pong")]


def signature_of(update: Any) -> bytes | None:
    if kind(update) == "transaction":
        return bytes(update.transaction.transaction.signature)
    if kind(update) == "transaction_status":
        return bytes(update.transaction_status.signature)
    return None


def filters(pb2: Any, watched: Pubkey, commitment: int) -> dict[str, Any]:
    key = str(watched)
    return {
        "slots": {"slots": pb2.SubscribeRequestFilterSlots()},
        "blocks_meta": {"meta": pb2.SubscribeRequestFilterBlocksMeta()},
        "transactions": {"to-me": pb2.SubscribeRequestFilterTransactions(account_include=[key])},
        "transactions_status": {"status": pb2.SubscribeRequestFilterTransactions(account_include=[key])},
        "accounts": {"mine": pb2.SubscribeRequestFilterAccounts(account=[key])},
        "commitment": commitment,
    }


class Reader:
    """Reads a stream in the background (as a client that keeps up does) until told to stop."""

    def __init__(self, sub: Subscription) -> None:
        self.sub = sub
        self.updates: list[Any] = []
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        while True:
            self.updates.append(await self.sub.read())

    def saw(self, signature: Signature) -> bool:
        # Both kinds: the fan-out sends a transaction's status right after it, and a reader stopped between the
        # two misses the status (a CI run failed so: transaction_status 0 == 1).
        kinds = {kind(u) for u in self.updates if signature_of(u) == bytes(signature)}
        return kinds >= {"transaction", "transaction_status"}

    async def until(self, signature: Signature) -> list[Any]:
        await eventually(lambda: self.saw(signature), f"{signature} read")
        return feed(self.updates)

    async def stop(self) -> list[Any]:
        # The call first: its pending read then ends at once. Cancelling the reading task first leaves
        # wait_for waiting for grpc's read to honour the cancellation, which it need not do promptly.
        self.sub.call.cancel()
        self.task.cancel()
        async with asyncio.timeout(WAIT_S):
            await asyncio.gather(self.task, return_exceptions=True)
        return feed(self.updates)


def position(within: list[bytes], part: list[bytes]) -> int:
    """Where ``part`` is a contiguous run of ``within`` (it must be one)."""
    assert part, "nothing to find"
    starts = [i for i, data in enumerate(within) if data == part[0]]
    found = [i for i in starts if within[i : i + len(part)] == part]
    assert len(found) == 1, f"not one contiguous run: starts {starts}, matches {found}"
    return found[0]


async def test_a_resumed_stream_gets_what_it_missed_once_in_order_then_the_live_stream(
    geyser: GeyserClient, serve_stream: StreamFactory, db: asyncpg.Connection, devnode: Devnode
) -> None:
    pb2 = geyser.pb2
    payer, watched = Keypair(), Keypair().pubkey()
    await airdrop(devnode.rpc_url, payer.pubkey())
    wanted = filters(pb2, watched, CONFIRMED)  # account, transaction and block updates wait for confirmation
    async with (
        asyncio.timeout(RUN_S),  # a hang fails here, and the server below stops and gives its seats back
        serve_stream(grpc_max_queued=SHORT_QUEUE) as stream,
        grpc.aio.insecure_channel(stream.address) as channel,
        AsyncClient(devnode.rpc_url) as node,
    ):
        log = stream.server.replay_log
        assert log is not None  # a new process's log starts empty: the test begins once it holds a slot to resume
        await eventually(lambda: log.newest is not None and log.oldest(CONFIRMED) <= log.newest, "a slot held")
        live_account, live_key = await stream.customer(db, 10_000)
        _, leaving_key = await stream.customer(db, 10_000)
        replay_account, replay_key = await stream.customer(db, 10_000)
        reference = Subscription(geyser, channel, live_key)  # never leaves
        await reference.send(**wanted)
        await reference.ping()
        kept = Reader(reference)

        leaving = Subscription(geyser, channel, leaving_key)
        await leaving.send(**wanted)
        await leaving.ping()
        before = Reader(leaving)
        first = await send_sol(node, payer, watched, 1_000_000)
        await before.until(first)
        gone = await before.stop()  # the client goes away
        await eventually(lambda: len(stream.server.fanout.members) == 1, "the server saw it go")

        missed = [await send_sol(node, payer, watched, 2_000_000 + n) for n in range(2)]  # the chain moves on
        resume_from = max(slot_of(u) for u in gone)
        await eventually(lambda: devnode.chain.slot >= resume_from + 15, "15 slots more")

        # One more lands as the client comes back: processed, it waits for its confirmation across the hand-over.
        missed.append(
            await submit(
                node, payer, [transfer(TransferParams(from_pubkey=payer.pubkey(), to_pubkey=watched, lamports=7))]
            )
        )
        resumed = Subscription(geyser, channel, replay_key)
        await resumed.send(**wanted, from_slot=resume_from)
        replayed = feed(await resumed.ping())  # the pong comes once the replay is sent and the stream is live
        after = Reader(resumed)
        last = await send_sol(node, payer, watched, 3_000_000)  # live only
        got = [*replayed, *await after.until(last)]
        await after.stop()
        everything = await kept.until(last)
        await kept.stop()

        # The stream that never left, the one that left and the resumed one are runs of one feed, byte for byte.
        all_bytes = [u.SerializeToString() for u in everything]
        left_at = position(all_bytes, [u.SerializeToString() for u in gone]) + len(gone)
        resumed_at = position(all_bytes, [u.SerializeToString() for u in got])
        assert resumed_at <= left_at, "a gap: updates after the client left are missing"
        assert slot_of(everything[resumed_at - 1]) < resume_from <= slot_of(everything[resumed_at])
        assert len(replayed) > 2 * SHORT_QUEUE  # sent in several rounds, while the feed went on

        # What it missed, every kind, once each: the transfers' transactions, statuses and account writes, the
        # block metas and slot statuses of every slot since it left, then the live transfer.
        for signature in [*missed, last]:
            for what in ("transaction", "transaction_status"):
                assert [signature_of(u) for u in got if kind(u) == what].count(bytes(signature)) == 1, what
        balances = [u.account.account.lamports for u in got if kind(u) == "account"]
        assert balances[-4:] == [3_000_000, 5_000_001, 5_000_008, 8_000_008] and balances.count(5_000_001) == 1
        metas = [u.block_meta.slot for u in got if kind(u) == "block_meta"]
        assert metas == sorted(set(metas)) and metas == [
            u.block_meta.slot for u in everything[resumed_at:] if kind(u) == "block_meta"
        ]
        assert max(slot_of(u) for u in gone) < metas[-1] and len(metas) >= 15
        statuses = [(u.slot.slot, u.slot.status) for u in got if kind(u) == "slot"]
        assert len(statuses) == len(set(statuses))

        # Billing: the replayed stream paid what the stream that got the same updates live paid.
        assert (
            await usage(db, stream, replay_account) == await usage(db, stream, live_account) == [("grpc:Subscribe", 1)]
        )
        assert stream.server.meter.remaining(replay_account) == stream.server.meter.remaining(live_account) == 9_999


async def test_a_slot_older_than_the_log_is_out_of_range_naming_the_oldest_and_a_future_one_is_live(
    geyser: GeyserClient, serve_stream: StreamFactory, db: asyncpg.Connection, devnode: Devnode
) -> None:
    pb2 = geyser.pb2
    started = devnode.chain.slot
    async with serve_stream() as stream, grpc.aio.insecure_channel(stream.address) as channel:
        # A process starts with an empty log: a slot from before it started is not held.
        log = stream.server.replay_log
        assert log is not None
        await eventually(lambda: log.oldest() is not None, "the log holds a slot")
        oldest = log.oldest()
        assert oldest is not None and oldest > started
        account, key = await stream.customer(db, 10_000)
        metadata = (("x-token", key),)
        info = await geyser.grpc.GeyserStub(channel).SubscribeReplayInfo(
            pb2.SubscribeReplayInfoRequest(), metadata=metadata
        )
        assert info.first_available == oldest

        old = Subscription(geyser, channel, key)
        await old.send(slots={"s": pb2.SubscribeRequestFilterSlots()}, from_slot=started)
        error = await old.error()
        assert error.code() == grpc.StatusCode.OUT_OF_RANGE, error
        assert f"the oldest slot available is {oldest} (at processed commitment" in error.details()
        assert re.search(rf"from_slot {started} is not available", error.details())

        at_oldest = Subscription(geyser, channel, key)  # the oldest slot itself is served, from its beginning
        await at_oldest.send(slots={"s": pb2.SubscribeRequestFilterSlots(interslot_updates=True)}, from_slot=oldest)
        first = await at_oldest.read()
        assert (first.slot.slot, first.slot.status) == (oldest, 5)  # SLOT_CREATED_BANK: the slot's first update

        newest = log.newest
        assert newest is not None
        ahead = Subscription(geyser, channel, key)  # not seen yet: the live stream at once
        await ahead.send(slots={"s": pb2.SubscribeRequestFilterSlots()}, from_slot=newest + 1_000)
        # Nothing replayed: whatever came before the pong is live. A live update is of a slot past what the log
        # held when it was asked (a slot may tick between the request and the ping on a loaded machine), or a
        # later commitment of an older slot (confirmed a slot or two behind, finalized about 32 behind).
        later = (pb2.SLOT_CONFIRMED, pb2.SLOT_FINALIZED)
        replayed = [
            u
            for u in feed(await ahead.ping())
            if slot_of(u) <= newest and not (kind(u) == "slot" and u.slot.status in later)
        ]
        assert replayed == []
        assert slot_of(await ahead.until(lambda u: kind(u) == "slot")) <= devnode.chain.slot + 1
        charged = sorted(await usage(db, stream, account))  # two streams served, one refused (refunded), the info
        served = [("grpc:Subscribe", 1)] * 2
        assert charged == [("grpc:Subscribe", 0), *served, ("grpc:SubscribeReplayInfo", 1)]


async def test_without_a_log_from_slot_is_unimplemented(
    geyser: GeyserClient, serve_stream: StreamFactory, db: asyncpg.Connection
) -> None:
    async with serve_stream(grpc_replay_slots=0) as stream, grpc.aio.insecure_channel(stream.address) as channel:
        _, key = await stream.customer(db, 10_000)
        sub = Subscription(geyser, channel, key)
        await sub.send(slots={"s": geyser.pb2.SubscribeRequestFilterSlots()}, from_slot=1)
        error = await sub.error()
        assert error.code() == grpc.StatusCode.UNIMPLEMENTED and "`from_slot` replay" in error.details()
