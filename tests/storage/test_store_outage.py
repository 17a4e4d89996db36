"""PostgreSQL or Redis stopped under a running gateway: every route that needs the stopped store answers
a documented 503 with a retry hint, the others keep working, and all recover when it is back.

The gateway has stores of its own here (a private embedded PostgreSQL and Redis), so stopping them
does not disturb the other tests.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import orjson
import pytest
from solana.rpc.async_api import AsyncClient
from solders.keypair import Keypair

from devnode.node import Devnode
from gateway.app.settings import Settings
from gateway.runtime.embedded import EmbeddedPostgres, EmbeddedRedis
from gateway.storage.migrate import migrate_url
from gateway_client import WalletSigner
from tests.auth.helpers import RPC_BODY, Answer, create_api_key, open_session, request, signed
from tests.chain import airdrop, mint_usdc, read_keypair, transfer_usdc, wait_confirmed
from tests.support import RunningGateway, serve_gateway, service_key_settings


@dataclass
class Stores:
    postgres: EmbeddedPostgres
    redis: EmbeddedRedis
    database_url: str
    redis_url: str


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[Stores]:
    postgres, redis = EmbeddedPostgres(tmp_path), EmbeddedRedis(tmp_path)
    database_url = postgres.start()
    asyncio.run(migrate_url(database_url))
    try:
        yield Stores(postgres, redis, database_url, redis.start())
    finally:
        redis.stop()
        postgres.stop()


@pytest.fixture
async def gateway(stores: Stores, tmp_path: Path, devnode_url: str) -> AsyncIterator[RunningGateway]:
    settings = Settings(
        **service_key_settings(tmp_path / "home"),
        home=tmp_path / "home",
        database_url=stores.database_url,
        redis_url=stores.redis_url,
        upstream_rpc_url=devnode_url,
        health_poll_s=5.0,
    )
    async with serve_gateway(settings) as running:
        yield running


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def assert_503(answer: Answer, *, jsonrpc: bool) -> None:
    """The documented 503: JSON-RPC -32003 on the JSON-RPC routes, the HTTP error body elsewhere,
    both with ``retry_after_secs`` and ``Retry-After``."""
    assert answer.status == 503, answer
    assert answer.headers["retry-after"] == "5"
    error = answer.json["error"]
    if jsonrpc:
        assert answer.json["jsonrpc"] == "2.0" and error["code"] == -32003, answer
    else:
        assert error["code"] == "SERVICE_TEMPORARILY_UNAVAILABLE" and error["requestId"], answer
    assert error["data"] == {"retry_after_secs": 5}
    assert "x-request-id" in answer.headers


async def finalized_deposit(devnode: Devnode, home: Path, wallet: Keypair) -> str:
    """A real USDC transfer from ``wallet`` to the deposit address, finalized."""
    deposit_wallet = read_keypair(home / "keys" / "deposit-wallet.json").pubkey()
    authority = devnode.usdc_mint_authority
    await airdrop(devnode.rpc_url, wallet.pubkey())
    await airdrop(devnode.rpc_url, authority.pubkey())
    async with AsyncClient(devnode.rpc_url) as node:
        await wait_confirmed(node, await mint_usdc(node, authority, wallet, wallet.pubkey(), 50_000))
        signature = await transfer_usdc(node, wallet, deposit_wallet, 50_000)
        await wait_confirmed(node, signature, finalized=True)
    return str(signature)


async def test_postgres_outage_is_503_everywhere_it_is_needed(
    stores: Stores, gateway: RunningGateway, http: aiohttp.ClientSession, devnode: Devnode, tmp_path: Path
) -> None:
    wallet = Keypair()
    signer = WalletSigner(bytes(wallet))
    key = await create_api_key(http, signer, gateway.url)  # never used for a call: not cached anywhere
    token = await open_session(http, signer, gateway.url)
    deposit = await finalized_deposit(devnode, tmp_path / "home", wallet)
    bearer = {"Authorization": f"Bearer {token}"}

    await asyncio.to_thread(stores.postgres.stop)
    url = gateway.url
    for path in ("/", "/rpc"):
        assert_503(await request(http, "POST", url + path, body=RPC_BODY, headers={"X-Api-Key": key}), jsonrpc=True)
    assert_503(await signed(http, signer, "POST", url, "/", RPC_BODY), jsonrpc=True)
    assert_503(await request(http, "POST", url + "/", body=RPC_BODY, headers=bearer), jsonrpc=True)
    for path in ("/account/info", "/account/ledger", "/account/history"):
        assert_503(await request(http, "GET", url + path, headers=bearer), jsonrpc=False)
        assert_503(await request(http, "GET", url + path, headers={"X-Api-Key": key}), jsonrpc=False)
    assert_503(await signed(http, signer, "POST", url, "/account/api-key", b"{}"), jsonrpc=False)
    confirm = orjson.dumps({"signature": deposit})
    assert_503(
        await request(http, "POST", url + "/account/confirm-deposit", body=confirm, headers=bearer), jsonrpc=False
    )

    # What needs only Redis or nothing keeps working.
    assert (await open_session(http, signer, url)) != token
    for path in ("/health", "/pricing", "/capabilities"):
        assert (await request(http, "GET", url + path)).status == 200

    await asyncio.to_thread(stores.postgres.start)
    for _ in range(100):  # the pool reconnects by itself
        answer = await request(http, "POST", url + "/", body=RPC_BODY, headers={"X-Api-Key": key})
        if answer.status != 503:
            break
        await asyncio.sleep(0.1)
    assert (answer.status, answer.code) == (402, -32010), answer  # the account exists, with no credits yet
    credited = await request(http, "POST", url + "/account/confirm-deposit", body=confirm, headers=bearer)
    assert credited.status == 200 and credited.json["credits_added"] == 5_000, credited
    assert (await request(http, "POST", url + "/", body=RPC_BODY, headers={"X-Api-Key": key})).status == 200


async def test_redis_outage_is_503_for_what_redis_proves(
    stores: Stores, gateway: RunningGateway, http: aiohttp.ClientSession
) -> None:
    wallet = WalletSigner(bytes(Keypair()))
    key = await create_api_key(http, wallet, gateway.url)
    token = await open_session(http, wallet, gateway.url)
    url = gateway.url

    await asyncio.to_thread(stores.redis.stop)
    assert_503(await signed(http, wallet, "POST", url, "/", RPC_BODY), jsonrpc=True)  # nonces fail closed
    assert_503(
        await request(http, "POST", url + "/", body=RPC_BODY, headers={"Authorization": f"Bearer {token}"}),
        jsonrpc=True,
    )
    body = orjson.dumps({"pubkey": wallet.pubkey})
    assert_503(await request(http, "POST", url + "/auth/challenge", body=body), jsonrpc=False)
    # An API key is proved by PostgreSQL: it keeps working (uncached while revocations cannot arrive).
    answer = await request(http, "GET", url + "/account/info", headers={"X-Api-Key": key})
    assert answer.status == 200 and answer.json["pubkey"] == wallet.pubkey, answer

    await asyncio.to_thread(stores.redis.start)
    for _ in range(100):
        answer = await signed(http, wallet, "POST", url, "/account/api-key", b"{}")
        if answer.status != 503:
            break
        await asyncio.sleep(0.1)
    assert answer.status == 200, answer
