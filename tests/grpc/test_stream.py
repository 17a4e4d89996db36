"""The gateway's gRPC stream with a generated Yellowstone client: slots, a real transfer seen as its
transaction, status and account updates, pings, filters replaced mid-stream, refusals, the stream cap."""

from __future__ import annotations

import asyncio

import asyncpg
import grpc
from solana.rpc.async_api import AsyncClient
from solders.keypair import Keypair
from solders.system_program import TransferParams, transfer

from devnode.node import Devnode
from tests.chain import airdrop, submit, wait_confirmed
from tests.grpc.client import WAIT_S, Subscription, eventually, kind
from tests.grpc.conftest import GeyserClient, RunningStream, StreamFactory

PROCESSED, CONFIRMED, FINALIZED = 0, 1, 2


async def test_slots_stream_every_status_with_the_filter_name(
    geyser: GeyserClient, stream: RunningStream, db: asyncpg.Connection
) -> None:
    _, key = await stream.customer(db, 10_000)
    async with grpc.aio.insecure_channel(stream.address) as channel:
        sub = Subscription(geyser, channel, key)
        await sub.send(slots={"my-slots": geyser.pb2.SubscribeRequestFilterSlots()})
        seen: dict[int, set[int]] = {}
        while not any(statuses >= {PROCESSED, CONFIRMED, FINALIZED} for statuses in seen.values()):
            update = await sub.until(lambda u: kind(u) == "slot")
            assert list(update.filters) == ["my-slots"]
            assert update.slot.status in (PROCESSED, CONFIRMED, FINALIZED)  # no interslot statuses unasked
            assert update.HasField("created_at")
            seen.setdefault(update.slot.slot, set()).add(update.slot.status)


async def test_a_real_transfer_is_seen_as_transaction_status_and_account_updates(
    geyser: GeyserClient, stream: RunningStream, db: asyncpg.Connection, devnode: Devnode
) -> None:
    _, key = await stream.customer(db, 10_000)
    payer, recipient = Keypair(), Keypair()
    await airdrop(devnode.rpc_url, payer.pubkey())
    watched = str(recipient.pubkey())
    pb2 = geyser.pb2
    async with grpc.aio.insecure_channel(stream.address) as channel:
        sub = Subscription(geyser, channel, key)
        await sub.send(
            transactions={"to-me": pb2.SubscribeRequestFilterTransactions(account_include=[watched], vote=False)},
            transactions_status={"status": pb2.SubscribeRequestFilterTransactions(account_required=[watched])},
            accounts={"mine": pb2.SubscribeRequestFilterAccounts(account=[watched])},
            commitment=pb2.CONFIRMED,
        )
        await sub.ping()  # the filters are live (upstream too) once the pong is back
        async with AsyncClient(devnode.rpc_url) as node:
            ix = transfer(TransferParams(from_pubkey=payer.pubkey(), to_pubkey=recipient.pubkey(), lamports=1_234_567))
            signature = await submit(node, payer, [ix])
            await wait_confirmed(node, signature)
        got: dict[str, object] = {}
        while len(got) < 3:
            update = await sub.read()
            got.setdefault(kind(update), update)
    tx, status, account = got["transaction"], got["transaction_status"], got["account"]
    assert list(tx.filters) == ["to-me"]  # type: ignore[attr-defined]
    info = tx.transaction.transaction  # type: ignore[attr-defined]
    assert info.signature == bytes(signature) and not info.is_vote
    assert bytes(recipient.pubkey()) in info.transaction.message.account_keys
    assert info.meta.post_balances[1] - info.meta.pre_balances[1] == 1_234_567
    assert not info.meta.HasField("err") and info.meta.fee == 5_000
    assert list(status.filters) == ["status"] and status.transaction_status.signature == bytes(signature)  # type: ignore[attr-defined]
    assert list(account.filters) == ["mine"]  # type: ignore[attr-defined]
    assert account.account.account.pubkey == bytes(recipient.pubkey())  # type: ignore[attr-defined]
    assert account.account.account.lamports == 1_234_567  # type: ignore[attr-defined]
    assert account.account.account.txn_signature == bytes(signature)  # type: ignore[attr-defined]


async def test_a_new_request_replaces_the_filters_and_a_ping_changes_nothing(
    geyser: GeyserClient, stream: RunningStream, db: asyncpg.Connection, devnode: Devnode
) -> None:
    _, key = await stream.customer(db, 10_000)
    pb2 = geyser.pb2
    first, second = Keypair().pubkey(), Keypair().pubkey()
    async with grpc.aio.insecure_channel(stream.address) as channel:
        sub = Subscription(geyser, channel, key)
        await sub.send(accounts={"first": pb2.SubscribeRequestFilterAccounts(account=[str(first)])})
        await sub.ping()
        await sub.ping()  # a ping alone keeps the filters
        devnode.chain.airdrop(first, 1_000_000)
        update = await sub.until(lambda u: kind(u) == "account")
        assert list(update.filters) == ["first"] and update.account.account.pubkey == bytes(first)

        await sub.send(accounts={"second": pb2.SubscribeRequestFilterAccounts(account=[str(second)])})
        await sub.ping()
        devnode.chain.airdrop(first, 2_000_000)  # no longer watched
        devnode.chain.airdrop(second, 3_000_000)
        update = await sub.until(lambda u: kind(u) == "account")
        assert list(update.filters) == ["second"] and update.account.account.lamports == 3_000_000


async def test_refused_without_a_token_with_a_bad_one_and_without_credits(
    geyser: GeyserClient, stream: RunningStream, db: asyncpg.Connection
) -> None:
    _, broke = await stream.customer(db, 0)
    pb2 = geyser.pb2
    assert stream.server.auth.sessions is not None
    no_account = await stream.server.auth.sessions.issue_token(str(Keypair().pubkey()))
    async with grpc.aio.insecure_channel(stream.address) as channel:
        cases = [
            (None, grpc.StatusCode.UNAUTHENTICATED, "missing x-token"),
            ("srpc_live_notakey", grpc.StatusCode.UNAUTHENTICATED, "x-token"),
            ("ab" * 32, grpc.StatusCode.UNAUTHENTICATED, "session token is invalid"),
            (broke, grpc.StatusCode.RESOURCE_EXHAUSTED, "insufficient credits (-32010)"),
            (no_account, grpc.StatusCode.RESOURCE_EXHAUSTED, "payment required (-32002)"),
        ]
        for token, code, message in cases:
            # refused before any request is read: sending one could race the refusal (the client's core
            # then ends the call INTERNAL), so the test only reads the status
            error = await Subscription(geyser, channel, token).error()
            assert (error.code(), message in (error.details() or "")) == (code, True), (token, error)
            metadata = (("x-token", token),) if token else ()
            try:
                await geyser.grpc.GeyserStub(channel).GetSlot(pb2.GetSlotRequest(), metadata=metadata)
                raise AssertionError("a refused caller got an answer")
            except grpc.aio.AioRpcError as exc:
                assert exc.code() == code and message in (exc.details() or ""), exc
    assert stream.server.service.streams == 0 and not stream.server.service.deps.seats.held


async def test_a_session_token_works_as_x_token(
    geyser: GeyserClient, stream: RunningStream, db: asyncpg.Connection
) -> None:
    pubkey, _ = await stream.customer(db, 1_000)
    assert stream.server.auth.sessions is not None
    token = await stream.server.auth.sessions.issue_token(pubkey)
    async with grpc.aio.insecure_channel(stream.address) as channel:
        sub = Subscription(geyser, channel, token)
        await sub.send(slots={"s": geyser.pb2.SubscribeRequestFilterSlots()})
        assert kind(await sub.until(lambda u: kind(u) == "slot")) == "slot"


async def test_invalid_and_unsupported_requests_end_the_stream_with_a_clear_status(
    geyser: GeyserClient, stream: RunningStream, db: asyncpg.Connection
) -> None:
    _, key = await stream.customer(db, 10_000)
    pb2 = geyser.pb2
    async with grpc.aio.insecure_channel(stream.address) as channel:
        bad = Subscription(geyser, channel, key)
        await bad.send(accounts={"a": pb2.SubscribeRequestFilterAccounts(account=["not-a-key"])})
        error = await bad.error()
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and "invalid account 'not-a-key'" in error.details()
        blocks = Subscription(geyser, channel, key)
        await blocks.send(blocks={"b": pb2.SubscribeRequestFilterBlocks()})
        error = await blocks.error()
        assert error.code() == grpc.StatusCode.UNIMPLEMENTED and "`blocks` filters" in error.details()
        try:
            await (
                geyser.grpc.GeyserStub(channel)
                .SubscribeGossip(pb2.SubscribeGossipRequest(), metadata=(("x-token", key),))
                .read()
            )
            raise AssertionError("SubscribeGossip answered")
        except grpc.aio.AioRpcError as exc:
            assert exc.code() == grpc.StatusCode.UNIMPLEMENTED and "SubscribeGossip" in exc.details()


async def test_open_streams_per_account_are_capped(
    geyser: GeyserClient, serve_stream: StreamFactory, db: asyncpg.Connection
) -> None:
    async with serve_stream(grpc_max_streams_per_account=2) as stream:
        _, key = await stream.customer(db, 10_000)
        _, other_key = await stream.customer(db, 10_000)
        async with grpc.aio.insecure_channel(stream.address) as channel:
            open_ = [Subscription(geyser, channel, key) for _ in range(2)]
            for sub in open_:
                await sub.send(slots={"s": geyser.pb2.SubscribeRequestFilterSlots()})
                await sub.ping()
            third = Subscription(geyser, channel, key)
            error = await third.error()
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "(2/2)" in error.details()
            other = Subscription(geyser, channel, other_key)  # the cap is per account
            await other.ping()
            open_[0].call.cancel()
            await eventually(lambda: len(stream.server.fanout.members) == 2, "the server saw the cancel")
            again = Subscription(geyser, channel, key)
            await again.ping()


async def test_the_stream_caps_hold_over_every_server_process(
    geyser: GeyserClient, serve_stream: StreamFactory, db: asyncpg.Connection
) -> None:
    """Two server processes on the same stores: the account's cap counts the streams of both
    (gateway.storage.seats), not a cap per process."""
    async with (
        serve_stream(grpc_max_streams_per_account=2) as first,
        serve_stream(grpc_max_streams_per_account=2) as second,
    ):
        _, key = await first.customer(db, 10_000)
        async with (
            grpc.aio.insecure_channel(first.address) as one,
            grpc.aio.insecure_channel(second.address) as two,
        ):
            held = [Subscription(geyser, one, key), Subscription(geyser, two, key)]
            for sub in held:
                await sub.send(slots={"s": geyser.pb2.SubscribeRequestFilterSlots()})
                await sub.ping()
            for channel in (one, two):
                error = await Subscription(geyser, channel, key).error()
                assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "(2/2)" in error.details()
            held[0].call.cancel()
            await eventually(lambda: not first.server.service.deps.seats.held, "the cancel seen")
            await Subscription(geyser, two, key).ping()


async def test_an_idle_stream_gets_server_pings(
    geyser: GeyserClient, serve_stream: StreamFactory, db: asyncpg.Connection
) -> None:
    async with serve_stream(grpc_ping_interval_s=0.2) as stream:
        _, key = await stream.customer(db, 10_000)
        async with grpc.aio.insecure_channel(stream.address) as channel:
            sub = Subscription(geyser, channel, key)
            quiet = geyser.pb2.SubscribeRequestFilterAccounts(account=[str(Keypair().pubkey())])
            await sub.send(accounts={"quiet": quiet})  # nothing will match
            pings = [await sub.until(lambda u: kind(u) == "ping") for _ in range(2)]
            assert all(p.HasField("created_at") and not p.filters for p in pings)


async def test_open_streams_per_client_address_are_capped_whatever_the_accounts(
    geyser: GeyserClient, serve_stream: StreamFactory, db: asyncpg.Connection
) -> None:
    async with serve_stream(grpc_max_streams_per_address=2) as stream:
        keys = [(await stream.customer(db, 10_000))[1] for _ in range(3)]
        async with grpc.aio.insecure_channel(stream.address) as channel:
            open_ = [Subscription(geyser, channel, key) for key in keys[:2]]
            for sub in open_:
                await sub.send(slots={"s": geyser.pb2.SubscribeRequestFilterSlots()})
                await sub.ping()
            third = Subscription(geyser, channel, keys[2])  # another account, the same address
            error = await third.error()
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error
            assert "from this address (2/2)" in (error.details() or "")
            open_[0].call.cancel()
            seats = stream.server.service.deps.seats
            address = "seats:grpc:address:127.0.0.1"
            await eventually(lambda: sum(s.key == address for s in seats.held) == 1, "the cancel seen")
            again = Subscription(geyser, channel, keys[2])
            await again.ping()


async def test_behind_a_trusted_proxy_open_streams_are_capped_per_forwarded_address(
    geyser: GeyserClient, serve_stream: StreamFactory, db: asyncpg.Connection
) -> None:
    """The cap counts the address the access rules see: behind a proxy listed in ``trusted_proxies`` (the
    peer 127.0.0.1 here, the grpcio client standing for Envoy) the ``x-forwarded-for`` metadata's, so two
    clients behind one proxy each hold their own streams and one cannot take another's seats."""
    async with serve_stream(grpc_max_streams_per_address=1, trusted_proxies=["127.0.0.1"]) as stream:
        keys = [(await stream.customer(db, 10_000))[1] for _ in range(3)]
        alice, bob = (("x-forwarded-for", "198.51.100.7"),), (("x-forwarded-for", "198.51.100.8"),)
        async with grpc.aio.insecure_channel(stream.address) as channel:
            first = Subscription(geyser, channel, keys[0], alice)
            await first.send(slots={"s": geyser.pb2.SubscribeRequestFilterSlots()})
            await first.ping()
            other = Subscription(geyser, channel, keys[1], bob)  # another client behind the same proxy
            await other.send(slots={"s": geyser.pb2.SubscribeRequestFilterSlots()})
            await other.ping()
            again = Subscription(geyser, channel, keys[2], alice)  # the first client again, another account
            error = await again.error()
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error
            assert "from this address (1/1)" in (error.details() or "")
            held = {s.key for s in stream.server.service.deps.seats.held}
            assert {"seats:grpc:address:198.51.100.7", "seats:grpc:address:198.51.100.8"} <= held


async def test_an_admitted_stream_sends_its_headers_before_any_request_or_update(
    geyser: GeyserClient, serve_stream: StreamFactory, db: asyncpg.Connection
) -> None:
    """Triton's client opens the stream, waits for the response headers, then writes its request: a server
    that sent them with the first update (a ping, 15 s away) held it that long. Pings 300 s off here, so only
    the headers themselves can end the wait."""
    async with serve_stream(grpc_ping_interval_s=300.0) as running:
        _, key = await running.customer(db, 10_000)
        async with grpc.aio.insecure_channel(running.address) as channel:
            sub = Subscription(geyser, channel, key)  # nothing written yet
            async with asyncio.timeout(WAIT_S):
                await sub.call.initial_metadata()
            await sub.send(slots={"s": geyser.pb2.SubscribeRequestFilterSlots()})
            assert kind(await sub.until(lambda u: kind(u) == "slot")) == "slot"
            sub.call.cancel()
