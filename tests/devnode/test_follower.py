"""Devnodes following a devnode (devnode/replication/), through real clients and real processes: a follower
serves the leader's chain from its own copy, forwards sends to the leader, lags when asked, notifies its own
PubSub and geyser subscribers, and lives through being stopped, its leader's restart and kill -9."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import orjson
import pytest
from solana.rpc.async_api import AsyncClient
from solders.hash import Hash
from solders.keypair import Keypair
from solders.message import MessageV0
from solders.pubkey import Pubkey
from solders.system_program import TransferParams, transfer
from solders.transaction import VersionedTransaction
from websockets.asyncio.client import connect

from devnode.config import DevnodeConfig
from devnode.node import Devnode
from devnode.replication import FollowError
from devnode.sol_usd_pool import SOL_USD_POOL
from devnode.tokens import TOKEN_PROGRAM_ID
from geyser_proto import geyser_pb2, geyser_pb2_grpc
from tests.devnode.helpers import SLOT_MS, rpc, rpc_payload, start_follower, start_node, wait_for, wait_landed

SOL = 10**9
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
async def leader(tmp_path: Path) -> AsyncIterator[Devnode]:
    node = await start_node(tmp_path / "leader")
    try:
        yield node
    finally:
        await node.stop()


@pytest.fixture
async def still_leader(tmp_path: Path) -> AsyncIterator[Devnode]:
    """A leader whose slot clock (an hour a slot) never ticks on its own: the test ticks it."""
    node = Devnode(DevnodeConfig(data_dir=tmp_path / "still", rpc_port=0, ws_port=0, slot_ms=3_600_000))
    await node.start()
    try:
        yield node
    finally:
        await node.stop()


@contextlib.asynccontextmanager
async def following(
    tmp_path: Path, leader: Devnode, name: str = "follower", **overrides: Any
) -> AsyncIterator[Devnode]:
    node = await start_follower(tmp_path / name, leader, **overrides)
    try:
        yield node
    finally:
        await node.stop()


async def result(url: str, method: str, *params: Any) -> Any:
    answer = await rpc(url, method, *params)
    assert "result" in answer, answer
    return answer["result"]


async def health_text(url: str) -> str:
    async with aiohttp.ClientSession() as session, session.get(f"{url}/health") as resp:
        assert resp.status == 200
        return await resp.text()


def transfer_tx(payer: Keypair, to: Pubkey, lamports: int, blockhash: Hash) -> VersionedTransaction:
    ix = transfer(TransferParams(from_pubkey=payer.pubkey(), to_pubkey=to, lamports=lamports))
    return VersionedTransaction(MessageV0.try_compile(payer.pubkey(), [ix], [], blockhash), [payer])


# ---------------------------------------------------------------- in process


async def test_a_follower_serves_the_leaders_chain_and_sends_to_the_leader(tmp_path: Path, leader: Devnode) -> None:
    async with following(tmp_path, leader) as follower, AsyncClient(follower.rpc_url) as client:
        assert await result(follower.rpc_url, "getGenesisHash") == str(leader.chain.genesis_hash)
        assert await result(follower.rpc_url, "getHealth") == "ok" and await health_text(follower.rpc_url) == "ok"
        payer, to = Keypair(), Keypair().pubkey()
        airdrop = (await client.request_airdrop(payer.pubkey(), 2 * SOL)).value  # forwarded, lands on the leader
        assert airdrop in leader.chain.txs
        await wait_landed(client, airdrop, "confirmed")

        blockhash = (await client.get_latest_blockhash()).value.blockhash  # the follower's, the leader's hash
        sig = (await client.send_transaction(transfer_tx(payer, to, 12_345_678, blockhash))).value
        assert sig in leader.chain.txs
        await wait_landed(client, sig, "finalized")
        async with AsyncClient(leader.rpc_url) as on_leader:
            await wait_landed(on_leader, sig, "finalized")
        slot = leader.chain.txs[sig].slot
        same: list[tuple[Any, ...]] = [
            ("getTransaction", str(sig), {"encoding": "json", "maxSupportedTransactionVersion": 0}),
            ("getTransaction", str(sig), {"encoding": "jsonParsed", "maxSupportedTransactionVersion": 0}),
            ("getBlock", slot, {"maxSupportedTransactionVersion": 0}),
            ("getSignaturesForAddress", str(payer.pubkey())),
        ]
        for method, *params in same:
            assert await result(follower.rpc_url, method, *params) == await result(leader.rpc_url, method, *params)
        same_values: list[tuple[Any, ...]] = [  # the context's slot is each node's own: a tick may fall between
            ("getSignatureStatuses", [str(sig), str(airdrop)]),
            ("getBalance", str(payer.pubkey())),
            ("getBalance", str(to)),
            ("getAccountInfo", str(to), {"encoding": "base64"}),
            (
                "getTokenAccountsByOwner",
                str(SOL_USD_POOL),
                {"programId": str(TOKEN_PROGRAM_ID)},
                {"encoding": "base64"},
            ),
        ]
        for method, *params in same_values:
            mine, its = await result(follower.rpc_url, method, *params), await result(leader.rpc_url, method, *params)
            assert mine["value"] == its["value"]
        assert (await client.get_balance(to)).value == 12_345_678

        async def tracking() -> bool:  # its slot follows the leader's, a few slots at most behind
            mine, its = await result(follower.rpc_url, "getSlot"), leader.chain.slot
            return bool(its - 3 <= mine <= its)

        await wait_for(tracking)
        nodes = await result(follower.rpc_url, "getClusterNodes")
        assert nodes[0]["tpuQuic"] == leader.tpu_quic_address and nodes[0]["rpc"] == leader.rpc_url.split("//")[1]

        batch = [
            {"jsonrpc": "2.0", "id": 1, "method": "getGenesisHash"},
            {"jsonrpc": "2.0", "id": 2, "method": "requestAirdrop", "params": [str(to), 7]},
            {"jsonrpc": "2.0", "id": 3, "method": "getSlot"},
        ]
        answers = await rpc_payload(follower.rpc_url, batch)
        assert [a["id"] for a in answers] == [1, 2, 3] and all("result" in a for a in answers)
        assert answers[0]["result"] == str(leader.chain.genesis_hash)

        assert follower.follower is not None and follower.follower.resyncs == 1
        await leader.drop_followers()  # the stream is cut: the follower reconnects and resumes where it was
        more = leader.chain.airdrop(to, SOL)
        await wait_landed(client, more)
        assert follower.follower.resyncs == 1  # resumed from its place in the log, no new base


async def test_a_lagging_follower_serves_older_state(tmp_path: Path, still_leader: Devnode) -> None:
    leader = still_leader
    for _ in range(60):
        leader.chain.tick()
    async with following(tmp_path, leader, lag_slots=30) as follower:
        slot, max_shred = await rpc_payload(
            follower.rpc_url,
            [
                {"jsonrpc": "2.0", "id": 1, "method": "getSlot"},
                {"jsonrpc": "2.0", "id": 2, "method": "getMaxShredInsertSlot"},
            ],
        )
        assert (slot["result"], max_shred["result"]) == (leader.chain.slot - 30, leader.chain.slot)  # the first answer
        assert await result(follower.rpc_url, "getHealth") == "ok"  # 30 is within Agave's 128

        payer = Keypair()
        sig = leader.chain.airdrop(payer.pubkey(), SOL)
        landed = leader.chain.txs[sig].slot
        for _ in range(29):
            leader.chain.tick()

        async def seen(slot: int) -> bool:
            return bool(await result(follower.rpc_url, "getMaxShredInsertSlot") == slot)

        await wait_for(lambda: seen(landed + 29))
        assert await result(follower.rpc_url, "getSignatureStatuses", [str(sig)]) == {
            "context": {"apiVersion": "2.3.0", "slot": landed - 1},
            "value": [None],
        }
        assert (await result(follower.rpc_url, "getBalance", str(payer.pubkey())))["value"] == 0
        late = await rpc(follower.rpc_url, "getBalance", str(payer.pubkey()), {"minContextSlot": landed})
        assert late["error"] == {
            "code": -32016,
            "message": "Minimum context slot has not been reached",
            "data": {"contextSlot": landed - 1},
        }

        leader.chain.tick()  # the leader is 30 slots past the transaction: the follower shows it

        async def shown() -> bool:
            return bool((await result(follower.rpc_url, "getSignatureStatuses", [str(sig)]))["value"][0])

        await wait_for(shown)
        assert await result(follower.rpc_url, "getSlot") == landed
        assert (await result(follower.rpc_url, "getBalance", str(payer.pubkey())))["value"] == SOL
        options = {"encoding": "json", "maxSupportedTransactionVersion": 0}
        assert await result(follower.rpc_url, "getTransaction", str(sig), options) == await result(
            leader.rpc_url, "getTransaction", str(sig), options
        )

    for _ in range(100):
        leader.chain.tick()
    async with following(tmp_path, leader, "far-behind", lag_slots=130) as far:
        assert await result(far.rpc_url, "getSlot") == leader.chain.slot - 130
        assert (await rpc(far.rpc_url, "getHealth"))["error"] == {
            "code": -32005,
            "message": "Node is behind by 130 slots",
            "data": {"numSlotsBehind": 130},
        }
        assert await health_text(far.rpc_url) == "behind"

    with pytest.raises(FollowError, match="replication window of 1024 slots"):
        await start_follower(tmp_path / "too-far", leader, lag_slots=2_000)


async def test_three_followers_of_one_leader_each_at_its_own_lag(tmp_path: Path, still_leader: Devnode) -> None:
    leader = still_leader
    async with contextlib.AsyncExitStack() as stack:
        followers = {
            lag: await stack.enter_async_context(following(tmp_path, leader, f"lag-{lag}", lag_slots=lag))
            for lag in (0, 2, 5)
        }
        assert leader.replication is not None and leader.replication.readers == 3
        payer = Keypair()
        sig = leader.chain.airdrop(payer.pubkey(), SOL)
        for _ in range(10):
            leader.chain.tick()

        async def all_there() -> bool:
            slots = [await result(f.rpc_url, "getSlot") for f in followers.values()]
            return slots == [leader.chain.slot - lag for lag in followers]

        await wait_for(all_there)
        for follower in followers.values():
            status = (await result(follower.rpc_url, "getSignatureStatuses", [str(sig)]))["value"][0]
            assert status["slot"] == leader.chain.txs[sig].slot


async def test_a_followers_pubsub_and_geyser_notify_the_leaders_changes(tmp_path: Path, leader: Devnode) -> None:
    watched = Keypair().pubkey()
    async with following(tmp_path, leader) as follower, connect(follower.ws_url) as ws:
        await ws.send(orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "slotSubscribe"}).decode())
        account_sub = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "accountSubscribe",
            "params": [str(watched), {"encoding": "base64", "commitment": "processed"}],
        }
        await ws.send(orjson.dumps(account_sub).decode())
        assert follower.grpc_address is not None
        async with grpc.aio.insecure_channel(follower.grpc_address) as channel:
            stream = geyser_pb2_grpc.GeyserStub(channel).Subscribe()
            await stream.write(
                geyser_pb2.SubscribeRequest(
                    slots={"s": geyser_pb2.SubscribeRequestFilterSlots()},
                    transactions={"t": geyser_pb2.SubscribeRequestFilterTransactions(account_include=[str(watched)])},
                )
            )
            await stream.write(geyser_pb2.SubscribeRequest(ping=geyser_pb2.SubscribeRequestPing(id=1)))
            while (await asyncio.wait_for(stream.read(), 10)).WhichOneof("update_oneof") != "pong":
                pass  # the filters are live once the pong is back

            sig = leader.chain.airdrop(watched, 3 * SOL)  # on the leader

            methods: set[str] = set()
            async with asyncio.timeout(10):
                while "accountNotification" not in methods or "slotNotification" not in methods:
                    message = json.loads(await ws.recv())
                    methods.add(message.get("method", "response"))
                    if message.get("method") == "accountNotification":
                        assert message["params"]["result"]["value"]["lamports"] == 3 * SOL
            kinds: set[str] = set()
            async with asyncio.timeout(10):
                while "transaction" not in kinds or "slot" not in kinds:
                    update = await stream.read()
                    kind = update.WhichOneof("update_oneof")
                    kinds.add(kind)
                    if kind == "transaction":
                        assert update.transaction.transaction.signature == bytes(sig)
                        assert update.transaction.slot == leader.chain.txs[sig].slot
            stream.cancel()


async def test_a_follower_never_switches_clusters(tmp_path: Path) -> None:
    leader = await start_node(tmp_path / "leader")
    port = int(leader.rpc_url.rsplit(":", 1)[1])
    genesis = str(leader.chain.genesis_hash)
    async with following(tmp_path, leader) as node:
        follower = node.follower
        assert follower is not None
        await leader.stop()
        other = Devnode(DevnodeConfig(data_dir=tmp_path / "other", rpc_port=port, ws_port=0, slot_ms=SLOT_MS))
        await other.start()  # another chain at the same address
        try:

            async def refused() -> bool:
                return follower.refused is not None

            await wait_for(refused)
            assert "another cluster" in (follower.refused or "")
            assert await result(node.rpc_url, "getGenesisHash") == genesis != str(other.chain.genesis_hash)
            assert (await rpc(node.rpc_url, "getHealth"))["error"]["message"] == "Node is unhealthy"
        finally:
            await other.stop()


# ---------------------------------------------------------------- a follower process


async def test_a_follower_process_lives_through_stops_and_its_leaders_restart(tmp_path: Path) -> None:
    leader_dir, ready = tmp_path / "leader", tmp_path / "follower" / "ready.json"
    leader = await start_node(leader_dir)
    port = int(leader.rpc_url.rsplit(":", 1)[1])
    args = ["--follow", leader.rpc_url, "--data-dir", str(tmp_path / "follower"), "--slot-ms", str(SLOT_MS)]
    args += ["--rpc-port", "0", "--ws-port", "0", "--grpc-port", "0", "--ready-file", str(ready)]
    out = os.open(tmp_path / "follower.log", os.O_WRONLY | os.O_CREAT, 0o644)  # what it logs, for a failure
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "devnode", *args, cwd=REPO, stdout=out, stderr=asyncio.subprocess.STDOUT
        )
    finally:
        os.close(out)
    try:

        async def ready_written() -> bool:
            return ready.exists()

        await wait_for(ready_written, 30)
        urls = json.loads(ready.read_text())
        url = urls["rpc_url"]
        assert urls["follow"] == leader.rpc_url and urls["ws_url"] and urls["grpc_url"] and urls["tpu_quic"] is None

        async def near_leader() -> bool:
            return bool(await result(url, "getSlot") >= leader.chain.slot - 3)

        async def healthy() -> bool:
            return bool((await rpc(url, "getHealth")).get("result") == "ok")

        await wait_for(near_leader)

        os.kill(proc.pid, signal.SIGSTOP)  # hung: it reads nothing, answers nothing
        stopped_at = leader.chain.slot
        payer = Keypair()
        sig = leader.chain.airdrop(payer.pubkey(), 4 * SOL)

        async def leader_moved_on() -> bool:
            return leader.chain.slot >= stopped_at + 20

        await wait_for(leader_moved_on)
        os.kill(proc.pid, signal.SIGCONT)
        await wait_for(near_leader, 10)  # caught up, the transaction of while it was stopped included
        assert (await result(url, "getSignatureStatuses", [str(sig)]))["value"][0]["slot"] == leader.chain.txs[sig].slot
        await wait_for(healthy)

        await leader.stop()  # the leader goes away: stale but still answering
        down = {"code": -32005, "message": "Node is unhealthy", "data": {"numSlotsBehind": None}}

        async def unhealthy() -> bool:
            return bool((await rpc(url, "getHealth")).get("error") == down)

        await wait_for(unhealthy)
        assert await health_text(url) == "unknown"
        assert (await result(url, "getBalance", str(payer.pubkey())))["value"] == 4 * SOL
        blockhash = Hash.from_string((await result(url, "getLatestBlockhash"))["value"]["blockhash"])
        raw = bytes(transfer_tx(payer, Keypair().pubkey(), 1, blockhash))
        refused = await rpc(url, "sendTransaction", raw.hex(), {"encoding": "base64"})
        assert refused["error"] == down
        slot_before = await result(url, "getSlot")

        leader = Devnode(DevnodeConfig(data_dir=leader_dir, rpc_port=port, ws_port=0, slot_ms=SLOT_MS))
        await leader.start()  # the same chain (its data dir), a new log: the follower re-syncs from it
        await wait_for(healthy, 10)
        await wait_for(near_leader)
        assert await result(url, "getGenesisHash") == str(leader.chain.genesis_hash)
        assert await result(url, "getSlot") > slot_before
        assert (await result(url, "getBalance", str(payer.pubkey())))["value"] == 4 * SOL

        proc.kill()  # kill -9: the leader does not notice beyond its stream closing
        await proc.wait()
        replication = leader.replication
        assert replication is not None

        async def stream_gone() -> bool:
            return replication.readers == 0

        await wait_for(stream_gone)
        slot = leader.chain.slot

        async def ticking() -> bool:
            return leader.chain.slot > slot + 2

        await wait_for(ticking)
        assert await result(leader.rpc_url, "getHealth") == "ok"
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await leader.stop()
