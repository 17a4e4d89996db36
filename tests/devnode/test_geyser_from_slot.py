"""The devnode's geyser server replays ``from_slot`` (devnode/geyser.py, devnode/geyser_replay.py), through
real ``grpcio`` streams to a real devnode: every held update of a slot at or after ``from_slot`` once, in
order, filtered as live, then live with nothing missing or twice at the seam; ``OUT_OF_RANGE`` before the
oldest slot held; ``SubscribeReplayInfo``; a follower replays what its leader does.

Most tests run a node whose slot clock never ticks on its own (an hour a slot): the test ticks it, so which
slots exist, and that ticks land while a replay runs, is decided here, not by timing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from solana.rpc.async_api import AsyncClient
from solders.keypair import Keypair
from solders.message import MessageV0
from solders.pubkey import Pubkey
from solders.system_program import TransferParams, transfer
from solders.transaction import VersionedTransaction

from devnode.config import DevnodeConfig
from devnode.geyser import GeyserServer
from devnode.node import Devnode
from geyser_proto import geyser_pb2, geyser_pb2_grpc
from tests.devnode.helpers import start_follower, wait_for, wait_landed

#: An upper bound for what comes within a few slots (or a replay of a few thousand updates), never a timing.
WAIT_S = 20.0
PROCESSED, CONFIRMED, FINALIZED = geyser_pb2.SLOT_PROCESSED, geyser_pb2.SLOT_CONFIRMED, geyser_pb2.SLOT_FINALIZED
REPLAY_SLOTS = 512  # the node's default retention


@pytest.fixture
async def still(tmp_path: Path) -> AsyncIterator[Devnode]:
    """A devnode whose slot clock never ticks on its own: the test ticks it."""
    node = Devnode(DevnodeConfig(data_dir=tmp_path / "still", rpc_port=0, ws_port=0, slot_ms=3_600_000))
    await node.start()
    try:
        yield node
    finally:
        await node.stop()


@pytest.fixture
async def channel(still: Devnode) -> AsyncIterator[grpc.aio.Channel]:
    assert still.grpc_address is not None
    async with grpc.aio.insecure_channel(still.grpc_address) as ch:
        yield ch


class Stream:
    """A Subscribe call: requests written, updates read within WAIT_S."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.call = geyser_pb2_grpc.GeyserStub(channel).Subscribe()

    async def send(self, **fields: Any) -> None:
        await self.call.write(geyser_pb2.SubscribeRequest(**fields))

    async def read(self) -> geyser_pb2.SubscribeUpdate:
        update = await asyncio.wait_for(self.call.read(), WAIT_S)
        assert update is not grpc.aio.EOF, "the stream ended without a status"
        assert isinstance(update, geyser_pb2.SubscribeUpdate)
        return update

    async def until(self, last: Callable[[geyser_pb2.SubscribeUpdate], bool]) -> list[geyser_pb2.SubscribeUpdate]:
        """The updates read up to and including the first ``last`` accepts (pings left out)."""
        seen: list[geyser_pb2.SubscribeUpdate] = []
        while True:
            update = await self.read()
            if update.WhichOneof("update_oneof") in ("ping", "pong"):
                continue
            seen.append(update)
            if last(update):
                return seen

    async def pong(self, ping_id: int = 1) -> list[geyser_pb2.SubscribeUpdate]:
        """Ping and read up to the pong: it comes once the replay before it is over (the stream is live)."""
        await self.send(ping=geyser_pb2.SubscribeRequestPing(id=ping_id))
        seen: list[geyser_pb2.SubscribeUpdate] = []
        while True:
            update = await self.read()
            if update.WhichOneof("update_oneof") == "pong":
                assert update.pong.id == ping_id
                return seen
            if update.WhichOneof("update_oneof") != "ping":
                seen.append(update)

    async def error(self) -> grpc.aio.AioRpcError:
        with pytest.raises(grpc.aio.AioRpcError) as ended:
            while True:
                await self.read()
        return ended.value


def status(slot: int, level: int) -> Callable[[geyser_pb2.SubscribeUpdate], bool]:
    return lambda u: u.WhichOneof("update_oneof") == "slot" and (u.slot.slot, u.slot.status) == (slot, level)


def statuses(updates: list[geyser_pb2.SubscribeUpdate], level: int) -> list[int]:
    """The slots of the ``level`` statuses, in the order received."""
    return [u.slot.slot for u in updates if u.WhichOneof("update_oneof") == "slot" and u.slot.status == level]


async def first_available(channel: grpc.aio.Channel) -> int | None:
    info = await geyser_pb2_grpc.GeyserStub(channel).SubscribeReplayInfo(geyser_pb2.SubscribeReplayInfoRequest())
    return info.first_available if info.HasField("first_available") else None


def tick(node: Devnode, times: int) -> None:
    for _ in range(times):
        node.chain.tick()


async def test_a_replay_gives_every_slot_from_from_slot_once_then_goes_live_with_no_gap(
    still: Devnode, channel: grpc.aio.Channel
) -> None:
    geyser = still.geyser
    assert geyser is not None
    tick(still, REPLAY_SLOTS + 100)  # more than the retention: the oldest slots went
    first = await first_available(channel)
    assert first == still.chain.slot - (REPLAY_SLOTS - 1)  # the open slot and the 511 before it
    start = first

    stream = Stream(channel)
    await stream.send(slots={"s": geyser_pb2.SubscribeRequestFilterSlots()}, from_slot=start)
    async with asyncio.timeout(WAIT_S):  # the replay of ~3,000 held updates runs over many chunks
        while True:  # looked at on every turn of the event loop, so while the replay is between two chunks
            if geyser.replaying:
                break
            await asyncio.sleep(0)
    tick(still, 5)  # published while the replay runs: it reads them after what it held
    assert geyser.replaying == 1
    replayed = await stream.pong()  # the replay is over once the pong comes: the stream is live
    assert geyser.replaying == 0
    assert statuses(replayed, PROCESSED) == list(range(start, still.chain.slot + 1))
    tick(still, 5)  # live
    newest = still.chain.slot
    updates = replayed + await stream.until(status(newest, PROCESSED))

    slots = [u.slot.slot for u in updates]
    assert min(slots) == start  # nothing of a slot before from_slot (not the finalization of start - 2)
    # Each slot from from_slot on: its processed status once, no slot missing, none twice, in order, and
    # its confirmation and finalization once each (a slot is confirmed one slot later, finalized two).
    assert statuses(updates, PROCESSED) == list(range(start, newest + 1))
    assert statuses(updates, CONFIRMED) == list(range(start, newest))
    assert statuses(updates, FINALIZED) == list(range(start, newest - 1))
    assert all(u.filters == ["s"] for u in updates)
    stream.call.cancel()


async def test_transactions_landed_before_the_subscribe_are_replayed_filtered_by_account(
    node: Devnode, client: AsyncClient, funded: Keypair
) -> None:
    assert node.geyser is not None and node.grpc_address is not None
    async with grpc.aio.insecure_channel(node.grpc_address) as channel:
        held: list[int] = []

        async def holding_a_slot_before_the_open_one() -> bool:
            first = await first_available(channel)
            held[:] = [first] if first is not None else []
            return first is not None and node.chain.slot > first

        await wait_for(holding_a_slot_before_the_open_one)
        watched, other = Keypair().pubkey(), Keypair().pubkey()
        sig = await send_transfer(client, funded, watched, 1_000_000)
        sig_other = await send_transfer(client, funded, other, 2_000_000)
        await wait_landed(client, sig)
        await wait_landed(client, sig_other)
        landed = node.chain.txs[sig].slot
        assert held[0] < landed  # from_slot landed - 1 is held
        wanted = {
            "transactions": {"t": geyser_pb2.SubscribeRequestFilterTransactions(account_include=[str(watched)])},
            "accounts": {"a": geyser_pb2.SubscribeRequestFilterAccounts(account=[str(watched)])},
            "slots": {"s": geyser_pb2.SubscribeRequestFilterSlots()},
        }
        stream = Stream(channel)
        await stream.send(**wanted, from_slot=landed - 1)
        replayed = await stream.pong()

        async def past_landed() -> bool:
            return node.chain.slot > landed

        await wait_for(past_landed)
        live_sig = await send_transfer(client, funded, watched, 3_000_000)  # after the replay: live, a later slot
        await wait_landed(client, live_sig)
        live_slot = node.chain.txs[live_sig].slot
        updates = replayed + await stream.until(status(live_slot + 2, PROCESSED))

        txs = [u.transaction for u in updates if u.WhichOneof("update_oneof") == "transaction"]
        assert [(t.transaction.signature, t.slot) for t in txs] == [(bytes(sig), landed), (bytes(live_sig), live_slot)]
        assert txs[0] == replayed_tx(replayed, sig)  # the first came in the replay
        accounts = [u.account for u in updates if u.WhichOneof("update_oneof") == "account"]
        assert [(a.account.pubkey, a.account.lamports, a.slot) for a in accounts] == [
            (bytes(watched), 1_000_000, landed),
            (bytes(watched), 4_000_000, live_slot),
        ]
        assert [a.account.txn_signature for a in accounts] == [bytes(sig), bytes(live_sig)]
        assert statuses(updates, PROCESSED) == list(range(landed - 1, live_slot + 3))

        # From the slot after the first transfer: the replay has the second, not the first (slot >= from_slot).
        later = Stream(channel)
        await later.send(**wanted, from_slot=landed + 1)
        replayed_later = await later.pong()
        assert replayed_tx(replayed_later, live_sig).slot == live_slot
        assert min(getattr(u, str(u.WhichOneof("update_oneof"))).slot for u in replayed_later) == landed + 1
        stream.call.cancel()
        later.call.cancel()


async def test_a_confirmed_replay_holds_a_transaction_until_its_slot_is_confirmed_even_across_the_seam(
    still: Devnode, channel: grpc.aio.Channel
) -> None:
    tick(still, 3)
    watched = Keypair().pubkey()
    early = still.chain.airdrop(watched, 1_000_000)
    early_slot = still.chain.slot
    tick(still, 2)  # the early one's slot is confirmed
    late = still.chain.airdrop(watched, 2_000_000)
    late_slot = still.chain.slot  # open: not confirmed when the replay ends
    stream = Stream(channel)
    await stream.send(
        transactions={"t": geyser_pb2.SubscribeRequestFilterTransactions(account_include=[str(watched)])},
        slots={"s": geyser_pb2.SubscribeRequestFilterSlots(filter_by_commitment=True)},
        commitment=geyser_pb2.CONFIRMED,
        from_slot=early_slot,
    )
    replayed = await stream.pong()
    shown = [(u.WhichOneof("update_oneof"), u.transaction.transaction.signature or u.slot.slot) for u in replayed]
    assert shown == [("transaction", bytes(early)), ("slot", early_slot), ("slot", early_slot + 1)]
    tick(still, 1)  # confirms the late one's slot, live: what the replay held back comes with it
    live = await stream.until(status(late_slot, CONFIRMED))
    assert [u.WhichOneof("update_oneof") for u in live] == ["transaction", "slot"]
    assert (live[0].transaction.transaction.signature, live[0].transaction.slot) == (bytes(late), late_slot)
    stream.call.cancel()


def replayed_tx(updates: list[geyser_pb2.SubscribeUpdate], sig: Any) -> geyser_pb2.SubscribeUpdateTransaction:
    found = [u.transaction for u in updates if u.WhichOneof("update_oneof") == "transaction"]
    assert [t.transaction.signature for t in found] == [bytes(sig)]
    return found[0]


async def send_transfer(client: AsyncClient, payer: Keypair, to: Pubkey, lamports: int) -> Any:
    blockhash = (await client.get_latest_blockhash()).value.blockhash
    ix = transfer(TransferParams(from_pubkey=payer.pubkey(), to_pubkey=to, lamports=lamports))
    tx = VersionedTransaction(MessageV0.try_compile(payer.pubkey(), [ix], [], blockhash), [payer])
    return (await client.send_transaction(tx)).value


async def test_a_from_slot_older_than_the_retention_ends_the_stream_out_of_range(
    still: Devnode, channel: grpc.aio.Channel
) -> None:
    tick(still, 3)
    first = await first_available(channel)
    assert first is not None and first > 0
    stream = Stream(channel)
    await stream.send(slots={"s": geyser_pb2.SubscribeRequestFilterSlots()}, from_slot=first - 1)
    refused = await stream.error()
    assert refused.code() == grpc.StatusCode.OUT_OF_RANGE
    assert refused.details() == f"broadcast from {first - 1} is not available, last available: {first}"

    # Once the retention is full the oldest slots go: a slot that was held is refused the same way.
    tick(still, REPLAY_SLOTS)
    gone = first
    first = await first_available(channel)
    assert first == still.chain.slot - (REPLAY_SLOTS - 1) and first > gone
    stream = Stream(channel)
    await stream.send(slots={"s": geyser_pb2.SubscribeRequestFilterSlots()}, from_slot=gone)
    refused = await stream.error()
    assert refused.code() == grpc.StatusCode.OUT_OF_RANGE
    assert refused.details() == f"broadcast from {gone} is not available, last available: {first}"


async def test_a_from_slot_newer_than_every_slot_held_is_live_at_once(
    still: Devnode, channel: grpc.aio.Channel
) -> None:
    tick(still, 3)
    ahead = still.chain.slot + 10
    stream = Stream(channel)
    await stream.send(slots={"s": geyser_pb2.SubscribeRequestFilterSlots()}, from_slot=ahead)
    assert await stream.pong() == []  # nothing replayed
    tick(still, 2)
    updates = await stream.until(status(still.chain.slot, PROCESSED))
    # Live, as Yellowstone does: the updates of slots before from_slot too.
    assert statuses(updates, PROCESSED) == [still.chain.slot - 1, still.chain.slot]
    stream.call.cancel()


async def test_replay_info_names_the_oldest_slot_held(still: Devnode, channel: grpc.aio.Channel) -> None:
    assert await first_available(channel) is None  # no slot began since the server started
    opened = still.chain.slot + 1
    tick(still, 1)
    assert await first_available(channel) == opened  # held from the first slot whose beginning it saw
    tick(still, 10)
    assert await first_available(channel) == opened
    tick(still, REPLAY_SLOTS)
    assert await first_available(channel) == still.chain.slot - (REPLAY_SLOTS - 1)

    # A server without retention: nothing to name, and from_slot is not served.
    bare = GeyserServer(still.chain, replay_slots=0)
    port = await bare.start("127.0.0.1", 0)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as bare_channel:
            tick(still, 1)
            assert await first_available(bare_channel) is None
            stream = Stream(bare_channel)
            await stream.send(slots={"s": geyser_pb2.SubscribeRequestFilterSlots()}, from_slot=still.chain.slot)
            assert (await stream.error()).code() == grpc.StatusCode.UNIMPLEMENTED
    finally:
        await bare.stop()


async def test_a_follower_replays_the_same_updates_as_its_leader(still: Devnode, tmp_path: Path) -> None:
    leader = still
    tick(leader, 2)
    follower = await start_follower(tmp_path / "follower", leader)
    try:

        async def synced() -> bool:
            return follower.chain.slot == leader.chain.slot

        tick(leader, 3)  # the follower's retention begins at the first slot it opens
        await wait_for(synced)
        watched = Keypair().pubkey()
        airdrop = leader.chain.airdrop(watched, 5_000_000)
        aired = leader.chain.txs[airdrop].slot
        tick(leader, 3)
        await wait_for(synced)
        assert leader.grpc_address is not None and follower.grpc_address is not None
        async with (
            grpc.aio.insecure_channel(leader.grpc_address) as to_leader,
            grpc.aio.insecure_channel(follower.grpc_address) as to_follower,
        ):
            start = await first_available(to_follower)
            leader_first = await first_available(to_leader)
            assert start is not None and leader_first is not None and leader_first <= start
            everything = {
                "slots": {"s": geyser_pb2.SubscribeRequestFilterSlots(interslot_updates=True)},
                "transactions": {"t": geyser_pb2.SubscribeRequestFilterTransactions()},
                "accounts": {"a": geyser_pb2.SubscribeRequestFilterAccounts()},
                "blocks_meta": {"b": geyser_pb2.SubscribeRequestFilterBlocksMeta()},
            }
            streams = [Stream(to_leader), Stream(to_follower)]
            seen: list[list[geyser_pb2.SubscribeUpdate]] = []
            for stream in streams:
                await stream.send(**everything, from_slot=start)
                seen.append(await stream.pong())
            tick(leader, 3)  # and some live
            await wait_for(synced)
            last = leader.chain.slot - 2  # its finalization is the last update of it
            for stream, updates in zip(streams, seen, strict=True):
                updates += await stream.until(status(last, FINALIZED))
                stream.call.cancel()
        on_leader, on_follower = (comparable(updates, start, last) for updates in seen)
        airdropped = [u.account for u in on_leader if u.WhichOneof("update_oneof") == "account"]
        assert bytes(watched) in {a.account.pubkey for a in airdropped} and {a.slot for a in airdropped} == {aired}
        assert [u.block_meta.slot for u in on_leader if u.WhichOneof("update_oneof") == "block_meta"] == list(
            range(start, last + 1)
        )
        assert [u.SerializeToString(deterministic=True) for u in on_follower] == [
            u.SerializeToString(deterministic=True) for u in on_leader
        ]
    finally:
        await follower.stop()


def comparable(updates: list[geyser_pb2.SubscribeUpdate], first: int, last: int) -> list[geyser_pb2.SubscribeUpdate]:
    """The updates of slots ``first`` to ``last``, without their creation times (each node stamps its own)."""
    out = []
    for update in updates:
        kind = update.WhichOneof("update_oneof")
        if first <= getattr(update, kind).slot <= last:
            update.ClearField("created_at")
            out.append(update)
    return out


async def test_a_follower_that_loads_a_new_base_replays_only_from_after_the_hole(tmp_path: Path) -> None:
    leader = Devnode(
        DevnodeConfig(data_dir=tmp_path / "leader", rpc_port=0, ws_port=0, slot_ms=3_600_000, replication_slots=4)
    )
    await leader.start()
    follower = await start_follower(tmp_path / "follower", leader)
    try:
        assert follower.follower is not None and follower.grpc_address is not None

        async def synced() -> bool:
            return follower.chain.slot == leader.chain.slot

        tick(leader, 3)
        await wait_for(synced)
        async with grpc.aio.insecure_channel(follower.grpc_address) as channel:
            before = await first_available(channel)
            assert before is not None
            cut_at = follower.chain.slot
            await leader.drop_followers()
            tick(leader, 10)  # past the leader's log before the follower is back: it loads a new base

            async def resynced() -> bool:
                return follower.follower is not None and follower.follower.resyncs == 2

            await wait_for(resynced)
            tick(leader, 3)
            await wait_for(synced)
            first = await first_available(channel)
            # Held from the first slot opened after the base: nothing of before the hole (the slots between the
            # cut and the base were never published here).
            assert first is not None and cut_at + 1 < first <= follower.chain.slot

            stream = Stream(channel)
            await stream.send(slots={"s": geyser_pb2.SubscribeRequestFilterSlots()}, from_slot=before)
            refused = await stream.error()
            assert refused.code() == grpc.StatusCode.OUT_OF_RANGE
            assert refused.details() == f"broadcast from {before} is not available, last available: {first}"

            stream = Stream(channel)
            await stream.send(slots={"s": geyser_pb2.SubscribeRequestFilterSlots()}, from_slot=first)
            replayed = await stream.pong()
            assert statuses(replayed, PROCESSED) == list(range(first, follower.chain.slot + 1))
            stream.call.cancel()
    finally:
        await follower.stop()
        await leader.stop()
