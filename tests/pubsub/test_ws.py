"""``/ws`` through real clients (``websockets`` and solana-py's ``SolanaWsClient``) in front of the
devnode's real PubSub: handshake auth and close codes, native subscriptions fed by real transfers,
shared upstream subscriptions counted at the node, limits, billing, and an upstream restart."""

from __future__ import annotations

import asyncio
import base64
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import orjson
import pytest
from solana.rpc.async_api import AsyncClient
from solana.rpc.websocket_api import SolanaWsClient
from solders.keypair import Keypair
from solders.rpc.responses import AccountNotification, SignatureNotification, SlotUpdateNotification
from solders.transaction import Transaction
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from devnode.config import DevnodeConfig
from devnode.node import Devnode
from gateway_client import WalletSigner
from tests.auth.helpers import create_account, open_session
from tests.chain import send_sol, signed_transfer
from tests.pubsub.conftest import new_caller
from tests.sending.conftest import sending_settings
from tests.sending.helpers import Caller
from tests.support import RunningGateway, serve_gateway

pytestmark = pytest.mark.asyncio


def ws_url(gateway: RunningGateway) -> str:
    return gateway.url.replace("http://", "ws://") + "/ws"


@asynccontextmanager
async def socket(gateway: RunningGateway, key: str | None = None, **kwargs: Any) -> AsyncIterator[ClientConnection]:
    if key is not None:
        kwargs["subprotocols"] = [f"auth.{key}", "solana-rpc"]
    async with connect(ws_url(gateway), **kwargs) as ws:
        yield ws


async def ask(ws: ClientConnection, method: str, params: list[Any] | None = None, req_id: int = 1) -> dict[str, Any]:
    """Send one request and return its answer (notifications that come first are skipped)."""
    await ws.send(orjson.dumps({"jsonrpc": "2.0", "id": req_id, "method": method, "params": params or []}))
    while True:
        message = orjson.loads(await asyncio.wait_for(ws.recv(), 10))
        if message.get("id") == req_id:
            return message  # type: ignore[no-any-return]


async def close_code(ws: ClientConnection) -> tuple[int | None, str | None]:
    with pytest.raises(ConnectionClosed):
        while True:
            await asyncio.wait_for(ws.recv(), 10)
    return ws.close_code, ws.close_reason


async def credits_of(caller: Caller) -> int:
    _, _, remaining = await caller.rpc("getBlockHeight", [])  # READ_CHEAP: 1 credit
    return remaining + 1


# -- handshake ------------------------------------------------------------------------------


async def test_api_key_in_the_subprotocol_is_never_echoed(gateway: RunningGateway, caller: Caller) -> None:
    async with socket(gateway, caller.headers["X-Api-Key"]) as ws:
        assert ws.subprotocol == "solana-rpc"
        answer = await ask(ws, "getSlot")  # a plain call over the socket, through the same stages
        assert isinstance(answer["result"], int)


async def test_session_token_in_the_authorization_header(gateway: RunningGateway, db: asyncpg.Connection) -> None:
    signer = WalletSigner(os.urandom(32))
    await create_account(db, signer.pubkey)
    async with aiohttp.ClientSession() as http:
        token = await open_session(http, signer, gateway.url)
    async with socket(gateway, additional_headers={"Authorization": f"Bearer {token}"}) as ws:
        assert (await ask(ws, "slotSubscribe"))["result"] == 1


@pytest.mark.parametrize(
    ("how", "code"),
    [
        ("nothing", 4001),
        ("bad key", 4001),
        ("bad token", 1008),
    ],
)
async def test_refused_upgrades_close_with_the_spec_codes(gateway: RunningGateway, how: str, code: int) -> None:
    kwargs: dict[str, Any] = {}
    if how == "bad key":
        kwargs["subprotocols"] = ["auth.srpc_live_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "solana-rpc"]
    elif how == "bad token":
        kwargs["additional_headers"] = {"Authorization": "Bearer not-a-token"}
    async with socket(gateway, **kwargs) as ws:
        got, reason = await close_code(ws)
    assert got == code and reason


async def test_a_balance_below_ten_closes_4002_at_the_handshake(
    gateway: RunningGateway, db: asyncpg.Connection
) -> None:
    async with aiohttp.ClientSession() as http:
        poor = await new_caller(http, gateway, db, 9)
        async with socket(gateway, poor.headers["X-Api-Key"]) as ws:
            got, reason = await close_code(ws)
    assert got == 4002 and reason is not None and "insufficient credits" in reason


async def test_too_many_messages_per_second_closes_4003(gateway: RunningGateway, caller: Caller) -> None:
    limits = gateway.app.ws_limits
    async with socket(gateway, caller.headers["X-Api-Key"]) as ws:
        for n in range(limits.message_burst + limits.messages_per_second + 1):
            try:
                await ws.send(orjson.dumps({"jsonrpc": "2.0", "id": n, "method": "slotUnsubscribe", "params": [0]}))
            except ConnectionClosed:
                break
        got, _ = await close_code(ws)
    assert got == 4003


# -- native subscriptions ---------------------------------------------------------------------


async def test_transfer_notifies_account_and_signature_subscribers(
    gateway: RunningGateway, caller: Caller, payer: Keypair, devnode: Devnode
) -> None:
    receiver = Keypair().pubkey()
    before = await credits_of(caller)
    kwargs = {"subprotocols": [f"auth.{caller.headers['X-Api-Key']}", "solana-rpc"]}
    tx = Transaction.from_bytes(base64.b64decode(await signed_transfer(devnode.rpc_url, payer, receiver, 42_000_000)))
    async with SolanaWsClient(ws_url(gateway), **kwargs) as ws, AsyncClient(devnode.rpc_url) as node:
        await ws.account_subscribe(pubkey=receiver, encoding="base64", commitment="confirmed")
        await ws.signature_subscribe(signature=tx.signatures[0], commitment="confirmed")
        await node.send_raw_transaction(bytes(tx))
        seen: dict[type, Any] = {}
        while SignatureNotification not in seen or AccountNotification not in seen:
            note = await asyncio.wait_for(ws.recv(), 10)
            assert type(note) not in seen, f"a second {type(note).__name__}"
            seen[type(note)] = note
    assert seen[AccountNotification].result.value.lamports == 42_000_000
    assert seen[SignatureNotification].result.value.err is None
    # two subscriptions (1 each) and two notifications (1 each); the balance read costs 1 more
    assert await credits_of(caller) == before - 1 - 4


async def test_slot_notifications_arrive_and_unsubscribe_stops_them(gateway: RunningGateway, caller: Caller) -> None:
    async with socket(gateway, caller.headers["X-Api-Key"]) as ws:
        sub = (await ask(ws, "slotSubscribe"))["result"]
        note = orjson.loads(await asyncio.wait_for(ws.recv(), 5))
        assert note["method"] == "slotNotification" and note["params"]["subscription"] == sub
        assert note["params"]["result"]["slot"] > 0
        assert (await ask(ws, "slotUnsubscribe", [sub], req_id=2))["result"] is True
        again = await ask(ws, "slotUnsubscribe", [sub], req_id=3)
        assert again["error"]["code"] == -32602


async def test_a_connections_notifications_are_history_entries_with_their_count(
    gateway: RunningGateway, caller: Caller
) -> None:
    """Each delivered notification is charged 1 credit; the history holds them per connection and
    settlement, ``calls`` adding up to what the client received (docs/api.md, History entries)."""
    received = 0
    async with socket(gateway, caller.headers["X-Api-Key"]) as ws:
        sub = (await ask(ws, "slotSubscribe"))["result"]
        deadline = asyncio.get_running_loop().time() + 2.5  # a few settlements' worth
        while asyncio.get_running_loop().time() < deadline:
            received += orjson.loads(await asyncio.wait_for(ws.recv(), 5)).get("method") == "slotNotification"
        await ws.send(orjson.dumps({"jsonrpc": "2.0", "id": 9, "method": "slotUnsubscribe", "params": [sub]}))
        while "id" not in (message := orjson.loads(await asyncio.wait_for(ws.recv(), 5))):
            received += message.get("method") == "slotNotification"
    assert received >= 10
    for _ in range(50):  # the meter settles once a second
        async with caller.http.get(caller.url + "/account/history", headers=caller.headers) as resp:
            entries = [e for e in (await resp.json())["entries"] if e["method"] == "slotNotification"]
        if sum(e["calls"] for e in entries) == received:
            break
        await asyncio.sleep(0.1)
    assert sum(e["calls"] for e in entries) == sum(e["credits"] for e in entries) == received
    assert 1 <= len(entries) < received and len({e["request_id"] for e in entries}) == 1


async def test_clients_watching_the_same_account_share_one_upstream_subscription(
    gateway: RunningGateway, caller: Caller, payer: Keypair, devnode: Devnode
) -> None:
    receiver = Keypair().pubkey()
    params = [str(receiver), {"encoding": "base64", "commitment": "confirmed"}]
    key = caller.headers["X-Api-Key"]
    before = devnode.pubsub_subscriptions
    async with socket(gateway, key) as one, socket(gateway, key) as two:
        first = (await ask(one, "accountSubscribe", params))["result"]
        second = (await ask(two, "accountSubscribe", params))["result"]
        assert devnode.pubsub_subscriptions == before + 1
        async with AsyncClient(devnode.rpc_url) as node:
            await send_sol(node, payer, receiver, 7_000_000)
        for ws, sub in ((one, first), (two, second)):
            note = orjson.loads(await asyncio.wait_for(ws.recv(), 10))
            assert note["method"] == "accountNotification" and note["params"]["subscription"] == sub
            assert note["params"]["result"]["value"]["lamports"] == 7_000_000
        await ask(one, "accountUnsubscribe", [first], req_id=2)
        assert devnode.pubsub_subscriptions == before + 1  # the other client still watches
        await ask(two, "accountUnsubscribe", [second], req_id=2)
        await wait_for(lambda: devnode.pubsub_subscriptions == before)


async def test_a_closed_connection_releases_its_upstream_subscriptions(
    gateway: RunningGateway, caller: Caller, devnode: Devnode
) -> None:
    before = devnode.pubsub_subscriptions
    async with socket(gateway, caller.headers["X-Api-Key"]) as ws:
        await ask(ws, "accountSubscribe", [str(Keypair().pubkey())])
        assert devnode.pubsub_subscriptions == before + 1
    await wait_for(lambda: devnode.pubsub_subscriptions == before)


async def test_the_101st_subscription_is_refused(gateway: RunningGateway, caller: Caller) -> None:
    async with socket(gateway, caller.headers["X-Api-Key"]) as ws:
        for n in range(100):
            answer = await ask(ws, "accountSubscribe", [str(Keypair().pubkey())], req_id=n)
            assert "result" in answer, answer
            await asyncio.sleep(0.011)  # under the frame rate limit
        refused = await ask(ws, "slotSubscribe", req_id=100)
    assert refused["error"] == {"code": -32000, "message": "Subscription limit reached (100/100)"}


async def test_denied_and_unavailable_methods_are_method_not_found(gateway: RunningGateway, caller: Caller) -> None:
    async with socket(gateway, caller.headers["X-Api-Key"]) as ws:
        denied = await ask(ws, "requestAirdrop", [str(Keypair().pubkey()), 1])
        block = await ask(ws, "blockSubscribe", ["all"], req_id=2)
        bad = await ask(ws, "accountSubscribe", ["not-a-key"], req_id=3)
    assert denied["error"]["code"] == -32601
    assert block["error"]["code"] == -32601 and "capabilities" in block["error"]["message"]
    assert bad["error"]["code"] == -32602  # the node's answer, passed on (and the subscription refunded)


async def test_running_out_of_credits_ends_subscriptions_then_closes_4002(
    gateway: RunningGateway, db: asyncpg.Connection
) -> None:
    async with aiohttp.ClientSession() as http:
        poor = await new_caller(http, gateway, db, 15)  # a subscription and a few slots
        async with socket(gateway, poor.headers["X-Api-Key"]) as ws:
            sub = (await ask(ws, "slotSubscribe"))["result"]
            slots, ended = 0, None
            with pytest.raises(ConnectionClosed):
                while True:
                    message = orjson.loads(await asyncio.wait_for(ws.recv(), 10))
                    if message["method"] == "slotNotification":
                        slots += 1
                    elif message["method"] == "subscriptionEnded":
                        ended = message["params"]
    assert ws.close_code == 4002
    assert ended == {"subscription": sub, "reason": "insufficient credits"}
    assert slots == 14 - 9  # 1 for the subscription, 1 per slot, closed once below the minimum of 10


async def test_notifications_resume_after_the_node_pubsub_restarts(
    tmp_path: Path, database_url: str, redis_url: str, db: asyncpg.Connection
) -> None:
    node = Devnode(DevnodeConfig(data_dir=tmp_path / "node", rpc_port=0, ws_port=0, slot_ms=100))
    await node.start()
    try:
        settings = sending_settings(tmp_path, database_url, redis_url, node.rpc_url, upstream_ws_url=node.ws_url)
        async with serve_gateway(settings) as gw, aiohttp.ClientSession() as http:
            user = await new_caller(http, gw, db, 10_000)
            async with socket(gw, user.headers["X-Api-Key"]) as ws:
                sub = (await ask(ws, "slotSubscribe"))["result"]
                await asyncio.wait_for(ws.recv(), 5)
                await node.restart_pubsub()
                await wait_for(lambda: gw.app.pubsub.connects >= 2, 15)
                seen = set()
                while len(seen) < 3:
                    note = orjson.loads(await asyncio.wait_for(ws.recv(), 10))
                    assert note["params"]["subscription"] == sub
                    slot = note["params"]["result"]["slot"]
                    assert slot not in seen, "a slot notified twice"
                    seen.add(slot)
            await wait_for(lambda: node.pubsub_subscriptions == 0)  # released on the new connection too
    finally:
        await node.stop()


async def wait_for(condition: Any, timeout_s: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


async def test_slots_updates_through_solana_py(gateway: RunningGateway, caller: Caller) -> None:
    kwargs = {"subprotocols": [f"auth.{caller.headers['X-Api-Key']}", "solana-rpc"]}
    async with SolanaWsClient(ws_url(gateway), **kwargs) as ws:
        await ws.slots_updates_subscribe()
        kinds = set()
        while not {"CreatedBank", "Root"} <= kinds:
            note = await asyncio.wait_for(ws.recv(), 10)
            assert isinstance(note, SlotUpdateNotification)
            kinds.add(type(note.result).__name__.removeprefix("SlotUpdate"))
