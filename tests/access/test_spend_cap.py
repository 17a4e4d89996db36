"""The daily spend cap (docs/api.md, "Spend cap") through the real stack: set only with the wallet,
read with any credential; reaching it refuses every spend, calls and a socket's notifications alike,
with 403 SPEND_CAP_REACHED (-32031, not a 402), exactly at the cap over two replicas."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import asyncpg
import orjson
import pytest
from websockets.asyncio.client import connect

from gateway.app.settings import Settings
from gateway.credits.errors import SPEND_CAP_RPC
from tests.access.conftest import BODY, Owner, rpc
from tests.auth.helpers import Answer, request, signed
from tests.pubsub.test_ws import ask, close_code, socket, ws_url
from tests.support import RunningGateway, serve_gateway


async def set_cap(http: aiohttp.ClientSession, owner: Owner, cap: Any, base: str | None = None) -> Answer:
    body = orjson.dumps({"daily_credits": cap})
    return await signed(http, owner.signer, "POST", base or owner.base, "/account/spend-cap", body)


async def spent_today(db: asyncpg.Connection, pubkey: str) -> int:
    """What the ledger's debits took today, from the ledger itself (not the account row's counter)."""
    value = await db.fetchval(
        """SELECT COALESCE(-sum(amount), 0) FROM ledger_entries WHERE pubkey = $1 AND type IN ('debit', 'refund')
           AND created_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'""",
        pubkey,
    )
    return int(value)


async def settled(*gateways: RunningGateway) -> None:
    for gw in gateways:
        await gw.app.meter.flush(final=True)


@pytest.fixture
async def replica_b(settings: Settings) -> AsyncIterator[RunningGateway]:
    async with serve_gateway(settings) as running:
        yield running


async def test_only_the_wallet_sets_the_cap_any_credential_reads_it(
    gateway: RunningGateway, http: aiohttp.ClientSession, owner: Owner
) -> None:
    for credential in owner.credentials().values():
        attempt = await request(
            http, "POST", gateway.url + "/account/spend-cap", body=b'{"daily_credits": 1}', headers=credential
        )
        assert (attempt.status, attempt.code) == (401, "AUTH_FAILED"), attempt
    answer = await set_cap(http, owner, 500)
    assert answer.status == 200 and answer.json["daily_credits"] == 500, answer
    assert answer.json["remaining_today"] == 500 and answer.json["resets_at"].endswith("T00:00:00.000Z")
    for credential in owner.credentials().values():
        read = await request(http, "GET", gateway.url + "/account/spend-cap", headers=credential)
        assert read.status == 200 and read.json["daily_credits"] == 500, read
    info = await request(http, "GET", gateway.url + "/account/info", headers={"X-Api-Key": owner.key})
    assert info.json["spend_cap"]["daily_credits"] == 500, info
    for bad in (0, -5, 1.5, True, "5", 10**16):
        refused = await set_cap(http, owner, bad)
        assert (refused.status, refused.code) == (400, "INVALID_REQUEST"), (bad, refused)
    lifted = await set_cap(http, owner, None)
    assert lifted.json["daily_credits"] is None and lifted.json["remaining_today"] is None, lifted


async def test_the_cap_stops_calls_exactly_and_is_not_a_402(
    gateway: RunningGateway, http: aiohttp.ClientSession, owner: Owner, db: asyncpg.Connection
) -> None:
    assert (await set_cap(http, owner, 5)).status == 200
    statuses = [(await rpc(http, gateway.url, {"X-Api-Key": owner.key})).status for _ in range(5)]
    assert statuses == [200] * 5, statuses
    refused = await rpc(http, gateway.url, {"X-Api-Key": owner.key})
    assert (refused.status, refused.code) == (403, SPEND_CAP_RPC), refused
    assert refused.json["error"]["data"]["resets_at"].endswith("T00:00:00Z")
    assert 1 <= int(refused.headers["retry-after"]) <= 86_400
    wallet = await rpc(http, gateway.url, owner.wallet("POST", "/", BODY))  # the cap is the account's
    assert (wallet.status, wallet.code) == (403, SPEND_CAP_RPC), wallet
    bulk = await request(
        http,
        "POST",
        gateway.url + "/bulk/getBalances",
        body=b'{"addresses":["11111111111111111111111111111111"]}',
        headers={"X-Api-Key": owner.key},
    )
    assert bulk.status == 403 and bulk.code == "SPEND_CAP_REACHED", bulk
    await settled(gateway)
    assert await spent_today(db, owner.signer.pubkey) == 5
    info = await request(http, "GET", gateway.url + "/account/info", headers={"X-Api-Key": owner.key})
    assert info.json["spend_cap"] | {"resets_at": None} == {
        "daily_credits": 5,
        "spent_today": 5,
        "remaining_today": 0,
        "resets_at": None,
    }, info
    assert (await set_cap(http, owner, 6)).status == 200  # raised: one more call
    assert (await rpc(http, gateway.url, {"X-Api-Key": owner.key})).status == 200


async def test_the_cap_ends_a_sockets_notifications_at_the_cap(
    gateway: RunningGateway, http: aiohttp.ClientSession, owner: Owner, db: asyncpg.Connection
) -> None:
    assert (await set_cap(http, owner, 8)).status == 200
    async with socket(gateway, owner.key) as ws:
        subscribed = await ask(ws, "slotSubscribe")  # 1 credit, then 1 per notification (a slot each 100 ms)
        assert isinstance(subscribed["result"], int), subscribed
        ended: list[dict[str, Any]] = []
        with pytest.raises(Exception):  # noqa: B017 -- the socket closes: read until it does
            while True:
                message = orjson.loads(await asyncio.wait_for(ws.recv(), 10))
                if message.get("method") == "subscriptionEnded":
                    ended.append(message)
        assert ws.close_code == 4005 and (ws.close_reason or "").startswith("SPEND_CAP_REACHED"), ws.close_reason
    assert ended and ended[0]["params"]["reason"] == "spend cap reached", ended
    await settled(gateway)
    assert await spent_today(db, owner.signer.pubkey) == 8  # the subscription and 7 notifications, no more


async def test_the_cap_is_exact_over_two_replicas(
    gateway: RunningGateway,
    replica_b: RunningGateway,
    http: aiohttp.ClientSession,
    owner: Owner,
    db: asyncpg.Connection,
) -> None:
    assert (await set_cap(http, owner, 40)).status == 200
    key = {"X-Api-Key": owner.key}

    async def calls(base: str) -> list[int]:
        return [(await rpc(http, base, key)).status for _ in range(35)]

    a, b = await asyncio.gather(calls(gateway.url), calls(replica_b.url))
    assert sorted(set(a + b)) == [200, 403], (a, b)
    assert (a + b).count(200) <= 40
    await settled(gateway, replica_b)
    spent = await spent_today(db, owner.signer.pubkey)
    assert spent == (a + b).count(200) <= 40, (spent, a, b)


async def test_a_wallet_signed_socket_is_capped_too(
    gateway: RunningGateway, http: aiohttp.ClientSession, owner: Owner
) -> None:
    assert (await set_cap(http, owner, 1)).status == 200
    assert (await rpc(http, gateway.url, {"X-Api-Key": owner.key})).status == 200
    wallet = owner.wallet("GET", "/ws", b"")
    async with connect(ws_url(gateway), additional_headers=wallet) as ws:
        refused = await ask(ws, "slotSubscribe")
        assert refused["error"]["code"] == SPEND_CAP_RPC, refused
        code, reason = await close_code(ws)
    assert code == 4005, (code, reason)
