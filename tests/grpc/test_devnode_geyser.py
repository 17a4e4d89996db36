"""The devnode's own geyser server, with the generated client: commitment, reads at a commitment,
what it does not implement. (The gateway re-serves it: the other tests here go through the gateway.)"""

from __future__ import annotations

import json

import grpc
import pytest
from solders.keypair import Keypair

from devnode.node import Devnode
from tests.grpc.client import Subscription, kind
from tests.grpc.conftest import GeyserClient

CONFIRMED_STATUS = 1


async def test_a_confirmed_stream_gets_a_transaction_when_its_slot_is_confirmed(
    geyser: GeyserClient, devnode: Devnode
) -> None:
    pb2 = geyser.pb2
    watched = Keypair().pubkey()
    assert devnode.grpc_address is not None
    async with grpc.aio.insecure_channel(devnode.grpc_address) as channel:
        sub = Subscription(geyser, channel, None)  # the node asks for no token
        await sub.send(
            transactions={"t": pb2.SubscribeRequestFilterTransactions(account_include=[str(watched)])},
            slots={"s": pb2.SubscribeRequestFilterSlots(filter_by_commitment=True)},
            commitment=pb2.CONFIRMED,
        )
        await sub.ping()
        signature = devnode.chain.airdrop(watched, 1_000_000)
        landed = devnode.chain.txs[signature].slot
        update = await sub.until(lambda u: kind(u) == "transaction")
        assert update.transaction.slot == landed and update.transaction.transaction.signature == bytes(signature)
        after = await sub.until(lambda u: kind(u) == "slot")  # its slot's confirmation comes right after it
        assert (after.slot.slot, after.slot.status) == (landed, CONFIRMED_STATUS)
        assert devnode.chain.commitment_of(devnode.chain.txs[signature]) >= CONFIRMED_STATUS


async def test_reads_answer_at_the_asked_commitment(geyser: GeyserClient, devnode: Devnode) -> None:
    pb2 = geyser.pb2
    assert devnode.grpc_address is not None
    async with grpc.aio.insecure_channel(devnode.grpc_address) as channel:
        stub = geyser.grpc.GeyserStub(channel)
        processed = (await stub.GetSlot(pb2.GetSlotRequest())).slot
        finalized = (await stub.GetSlot(pb2.GetSlotRequest(commitment=pb2.FINALIZED))).slot
        assert finalized < processed
        latest = await stub.GetLatestBlockhash(pb2.GetLatestBlockhashRequest(commitment=pb2.CONFIRMED))
        assert (await stub.IsBlockhashValid(pb2.IsBlockhashValidRequest(blockhash=latest.blockhash))).valid
        unknown = str(Keypair().pubkey())  # base58 of 32 bytes: a well-formed hash no block has
        assert not (await stub.IsBlockhashValid(pb2.IsBlockhashValidRequest(blockhash=unknown))).valid
        assert (await stub.Ping(pb2.PingRequest(count=9))).count == 9
        assert json.loads((await stub.GetVersion(pb2.GetVersionRequest())).version)["version"]["solana"]
        with pytest.raises(grpc.aio.AioRpcError) as bad:
            await stub.GetSlot(pb2.GetSlotRequest(commitment=5))
        assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(grpc.aio.AioRpcError) as bad:
            await stub.IsBlockhashValid(pb2.IsBlockhashValidRequest(blockhash="not-a-hash"))
        assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "invalid blockhash" in bad.value.details()


@pytest.mark.parametrize("rpc", ["SubscribeGossip", "SubscribeDeshred"])
async def test_what_the_devnode_does_not_serve_is_unimplemented(
    geyser: GeyserClient, devnode: Devnode, rpc: str
) -> None:
    pb2 = geyser.pb2
    assert devnode.grpc_address is not None
    async with grpc.aio.insecure_channel(devnode.grpc_address) as channel:
        stub = geyser.grpc.GeyserStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            if rpc == "SubscribeGossip":
                await stub.SubscribeGossip(pb2.SubscribeGossipRequest()).read()
            else:
                call = stub.SubscribeDeshred()
                await call.read()
        assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED
        assert f"{rpc} is not implemented by the devnode" in (refused.value.details() or "")
