"""A signed request's nonce is recorded only once its keypair is known to have an account, except on
the account routes, which serve keypairs without one: fresh keypairs cannot fill Redis with nonces,
and the account-creating route keeps its replay protection."""

from __future__ import annotations

import aiohttp
import asyncpg
import redis.asyncio as aioredis

from gateway_client import WalletSigner
from tests.auth.helpers import RPC_BODY, create_account, deposit_credited, request
from tests.support import RunningGateway


def nonce_key(signer: WalletSigner, nonce: str) -> str:
    return f"nonce:{signer.pubkey}:{nonce}"


async def test_a_keypair_without_an_account_leaves_no_nonce_behind(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner, redis_client: aioredis.Redis
) -> None:
    headers = signer.headers("POST", "/", RPC_BODY, nonce="fresh-1")
    answer = await request(http, "POST", gateway.url + "/", body=RPC_BODY, headers=headers)

    assert answer.status == 402 and answer.code == -32002, answer  # the documented answer, with the terms
    assert signer.pubkey in answer.json["error"]["data"]["instructions"]
    assert await redis_client.exists(nonce_key(signer, "fresh-1")) == 0
    again = await request(http, "POST", gateway.url + "/", body=RPC_BODY, headers=headers)
    assert again.status == 402, again  # nothing was accepted, so nothing is a replay
    bad = await request(http, "POST", gateway.url + "/", body=RPC_BODY, headers={**headers, "X-Nonce": "other"})
    assert bad.status == 401 and bad.code == "AUTH_FAILED", bad  # a bad signature is still 401 first


async def test_once_the_account_exists_the_same_request_is_accepted_once(
    gateway: RunningGateway,
    http: aiohttp.ClientSession,
    signer: WalletSigner,
    db: asyncpg.Connection,
    redis_client: aioredis.Redis,
) -> None:
    headers = signer.headers("POST", "/", RPC_BODY, nonce="early")
    assert (await request(http, "POST", gateway.url + "/", body=RPC_BODY, headers=headers)).status == 402
    await create_account(db, signer.pubkey)
    await deposit_credited(gateway, signer.pubkey)  # the 402's "no account" is remembered until told
    first = await request(http, "POST", gateway.url + "/", body=RPC_BODY, headers=headers)
    assert first.status == 200, first
    assert await redis_client.exists(nonce_key(signer, "early")) == 1
    again = await request(http, "POST", gateway.url + "/", body=RPC_BODY, headers=headers)
    assert (again.status, again.code) == (403, "NONCE_REUSED"), again


async def test_the_account_creating_route_keeps_its_replay_protection(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner, redis_client: aioredis.Redis
) -> None:
    headers = signer.headers("POST", "/account/api-key", b"{}", nonce="create")
    first = await request(http, "POST", gateway.url + "/account/api-key", body=b"{}", headers=headers)
    assert first.status == 200 and first.json["api_key"], first
    assert await redis_client.exists(nonce_key(signer, "create")) == 1
    replay = await request(http, "POST", gateway.url + "/account/api-key", body=b"{}", headers=headers)
    assert (replay.status, replay.code) == (403, "NONCE_REUSED"), replay  # a replay gets no new key


async def test_the_account_routes_still_answer_a_keypair_without_an_account(
    gateway: RunningGateway, http: aiohttp.ClientSession, signer: WalletSigner
) -> None:
    headers = signer.headers("GET", "/account/info", b"", nonce="info")
    answer = await request(http, "GET", gateway.url + "/account/info", headers=headers)
    assert (answer.status, answer.code) == (404, "ACCOUNT_NOT_FOUND"), answer
    replay = await request(http, "GET", gateway.url + "/account/info", headers=headers)
    assert (replay.status, replay.code) == (403, "NONCE_REUSED"), replay
