"""An account with no credits (``POST /account/api-key`` makes one for free) writes no nonce to the shared
Redis per signed JSON-RPC call: once the replica's meter knows it cannot pay, its signed calls get their
402 before the nonce is recorded (docs/api.md, Authentication). The real gateway, PostgreSQL and Redis."""

from __future__ import annotations

import os

import aiohttp
import orjson
import redis.asyncio as aioredis

from gateway.auth.store.nonces import nonce_key
from gateway_client import WalletSigner
from tests.auth.helpers import create_api_key, signed
from tests.support import RunningGateway

BODY = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "getSlot"})


async def test_an_unfunded_accounts_signed_calls_record_no_nonce(
    gateway: RunningGateway, http: aiohttp.ClientSession, redis_client: aioredis.Redis
) -> None:
    signer = WalletSigner(os.urandom(32))
    await create_api_key(http, signer, gateway.url)  # an account with a zero balance
    first = await signed(http, signer, "POST", gateway.url, "/", BODY, nonce="first-call")
    assert (first.status, first.json["error"]["code"]) == (402, -32010), first
    assert await redis_client.exists(nonce_key(signer.pubkey, "first-call"))  # the meter had not asked yet

    for n in range(3):  # now the meter knows, from the store's fresh answer
        answer = await signed(http, signer, "POST", gateway.url, "/", BODY, nonce=f"later-{n}")
        assert (answer.status, answer.json["error"]["code"]) == (402, -32010), answer
        assert answer.json["error"]["data"]["required"] == 1
        assert not await redis_client.exists(nonce_key(signer.pubkey, f"later-{n}"))

    batch = orjson.dumps([{"jsonrpc": "2.0", "id": i, "method": "getSlot"} for i in range(3)])
    answer = await signed(http, signer, "POST", gateway.url, "/", batch, nonce="batch")
    assert answer.status == 402, answer
    assert not await redis_client.exists(nonce_key(signer.pubkey, "batch"))


async def test_an_unfunded_account_still_reaches_its_account_routes(
    gateway: RunningGateway, http: aiohttp.ClientSession, redis_client: aioredis.Redis
) -> None:
    """The account routes bill nothing: a zero balance is no reason to refuse them."""
    signer = WalletSigner(os.urandom(32))
    await create_api_key(http, signer, gateway.url)
    for n in range(2):
        await signed(http, signer, "POST", gateway.url, "/", BODY, nonce=f"rpc-{n}")
    info = await signed(http, signer, "GET", gateway.url, "/account/info", nonce="info")
    assert info.status == 200, info
    assert await redis_client.exists(nonce_key(signer.pubkey, "info"))
