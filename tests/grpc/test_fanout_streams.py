"""Fan-out under load: a client that does not read is cut off with RESOURCE_EXHAUSTED while a client
that reads gets every update, and streams with the same filters cost one evaluation per update."""

from __future__ import annotations

import asyncpg
import grpc
from solders.keypair import Keypair

from devnode.node import Devnode
from geyser_proto.fanout import Member
from tests.grpc.client import Subscription, eventually, kind
from tests.grpc.conftest import GeyserClient, StreamFactory

#: A client whose HTTP/2 window stays at its initial 64 KiB: once that is full the server's writes wait
#: on it, as they would on a client that reads slowly over a slow link.
NOT_READING = [("grpc.http2.bdp_probe", 0)]


async def test_a_slow_client_is_cut_off_while_a_fast_one_keeps_up(
    geyser: GeyserClient, serve_stream: StreamFactory, db: asyncpg.Connection, devnode: Devnode
) -> None:
    pb2 = geyser.pb2
    wanted = {"everything": pb2.SubscribeRequestFilterTransactions()}
    async with serve_stream(grpc_max_queued=50) as stream:
        _, key = await stream.customer(db, 100_000)
        fast_channel = grpc.aio.insecure_channel(stream.address)
        slow_channel = grpc.aio.insecure_channel(stream.address, options=NOT_READING)
        async with fast_channel, slow_channel:
            fast, slow = Subscription(geyser, fast_channel, key), Subscription(geyser, slow_channel, key)
            for sub in (fast, slow):
                await sub.send(transactions=wanted)
                await sub.ping()
            seen: set[bytes] = set()
            sent: list[bytes] = []
            recipient = Keypair().pubkey()
            while len(stream.server.fanout.members) == 2 and len(sent) < 3_000:
                for _ in range(10):
                    sent.append(bytes(devnode.chain.airdrop(recipient, 1_000_000 + len(sent))))
                while not seen >= set(sent):  # the fast client reads all it was sent before the next batch
                    update = await fast.read()
                    if kind(update) == "transaction":
                        seen.add(update.transaction.transaction.signature)
            assert len(stream.server.fanout.members) == 1, "the client that does not read was never cut off"
            error = await slow.error()  # what the server had written, then the status
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "not reading its updates fast enough" in error.details()
            for _ in range(10):  # the fast one goes on
                sent.append(bytes(devnode.chain.airdrop(recipient, 2_000_000 + len(sent))))
            while not seen >= set(sent):
                update = await fast.read()
                if kind(update) == "transaction":
                    seen.add(update.transaction.transaction.signature)


async def test_identical_filters_of_many_streams_are_evaluated_once_per_update(
    geyser: GeyserClient, serve_stream: StreamFactory, db: asyncpg.Connection, devnode: Devnode
) -> None:
    pb2 = geyser.pb2
    watched = Keypair().pubkey()
    async with serve_stream() as stream:
        _, key = await stream.customer(db, 10_000)
        async with grpc.aio.insecure_channel(stream.address) as channel:
            subs = [Subscription(geyser, channel, key) for _ in range(3)]
            for sub in subs:
                await sub.send(accounts={"watched": pb2.SubscribeRequestFilterAccounts(account=[str(watched)])})
                await sub.ping()
            fanout = stream.server.fanout
            before = (fanout.evaluated, stream.server.upstream.updates)
            devnode.chain.airdrop(watched, 1_000_000)
            for sub in subs:
                update = await sub.until(lambda u: kind(u) == "account")
                assert update.account.account.pubkey == bytes(watched) and list(update.filters) == ["watched"]
            # One account update came from upstream (the union asks for the watched key only), and the
            # one distinct filter of the three streams was evaluated once for it.
            assert fanout.evaluated - before[0] == 1
            assert len(fanout.members) == 3


async def test_the_process_holds_one_upstream_subscription_for_all_its_streams(
    geyser: GeyserClient, serve_stream: StreamFactory, db: asyncpg.Connection, devnode: Devnode
) -> None:
    assert devnode.geyser is not None
    async with serve_stream() as stream:
        _, key = await stream.customer(db, 10_000)
        async with grpc.aio.insecure_channel(stream.address) as channel:
            subs = [Subscription(geyser, channel, key) for _ in range(4)]
            for n, sub in enumerate(subs):
                await sub.send(slots={f"s{n}": geyser.pb2.SubscribeRequestFilterSlots()})
                await sub.ping()
            geyser = devnode.geyser

            def upstream() -> list[Member]:  # the devnode's streams asking for slots (earlier tests' end soon)
                return [m for m in geyser.fanout.members if m.filters.slots]

            await eventually(lambda: len(upstream()) == 1, "one upstream subscription for the four streams")
            assert [name for name, _ in upstream()[0].filters.slots] == ["slots"]  # the union's, every status
            for n, sub in enumerate(subs):
                assert list((await sub.until(lambda u: kind(u) == "slot")).filters) == [f"s{n}"]
