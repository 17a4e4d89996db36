"""Access rules on ``/ws``: the Origin and the address at the upgrade (close 4004 ACCESS_DENIED), the
method rule on each call and subscription (-32030), a wallet-signed socket never refused."""

from __future__ import annotations

import aiohttp
from websockets.asyncio.client import connect

from gateway.access.rules import ACCESS_DENIED_CLOSE, ACCESS_DENIED_RPC
from tests.access.conftest import Owner
from tests.pubsub.test_ws import ask, close_code, socket, ws_url
from tests.support import RunningGateway


async def test_a_socket_from_a_refused_origin_closes_4004_at_the_upgrade(
    gateway: RunningGateway, http: aiohttp.ClientSession, owner: Owner
) -> None:
    assert (await owner.put_rules(http, {"origins": ["https://app.example.com"]})).status == 200
    async with socket(gateway, owner.key, origin="https://evil.example.net") as ws:  # type: ignore[arg-type]
        code, reason = await close_code(ws)
    assert code == ACCESS_DENIED_CLOSE and reason is not None and reason.startswith("ACCESS_DENIED"), (code, reason)
    bearer = {"Authorization": f"Bearer {owner.token}"}
    async with connect(ws_url(gateway), additional_headers=bearer, origin="https://evil.example.net") as ws:  # type: ignore[arg-type]
        code, reason = await close_code(ws)
    assert code == ACCESS_DENIED_CLOSE, (code, reason)
    async with socket(gateway, owner.key, origin="https://app.example.com") as ws:  # type: ignore[arg-type]
        assert isinstance((await ask(ws, "getSlot"))["result"], int)
    wallet = owner.wallet("GET", "/ws", b"")
    async with connect(ws_url(gateway), additional_headers=wallet, origin="https://evil.example.net") as ws:  # type: ignore[arg-type]
        assert isinstance((await ask(ws, "getSlot"))["result"], int)


async def test_a_method_rule_refuses_calls_and_subscriptions_on_the_socket(
    gateway: RunningGateway, http: aiohttp.ClientSession, owner: Owner
) -> None:
    assert (await owner.put_rules(http, {"methods": ["getSlot", "accountSubscribe"]})).status == 200
    async with socket(gateway, owner.key) as ws:
        assert isinstance((await ask(ws, "getSlot"))["result"], int)
        balance = await ask(ws, "getBalance", ["11111111111111111111111111111111"], req_id=2)
        assert balance["error"]["code"] == ACCESS_DENIED_RPC, balance
        slots = await ask(ws, "slotSubscribe", [], req_id=3)
        assert slots["error"]["code"] == ACCESS_DENIED_RPC, slots
        account = await ask(ws, "accountSubscribe", ["11111111111111111111111111111111"], req_id=4)
        assert isinstance(account["result"], int), account
    wallet = owner.wallet("GET", "/ws", b"")
    async with connect(ws_url(gateway), additional_headers=wallet) as ws:
        assert isinstance((await ask(ws, "slotSubscribe"))["result"], int)
