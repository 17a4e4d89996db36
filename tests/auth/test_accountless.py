"""A valid signature from a keypair without an account: its interface answer (402 with the deposit terms)
costs one store query, not one per call; past the failed-authentication budget its address gets 429 with
``Retry-After``; no nonce is stored for it; and once its deposit is credited its next call is served.

Issue 49 found 3,000 replays of one such signed request answered 3,000 x 402 in 3 s, each an Ed25519
check and a PostgreSQL query, with no limit. The store queries are counted by the real PostgreSQL
(``pg_stat_statements``, preloaded in a server of this module's own), the deposit is a real USDC transfer
on the devnode confirmed through ``POST /account/confirm-deposit``."""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import orjson
import pytest
import redis.asyncio as aioredis
from solana.rpc.async_api import AsyncClient
from solders.keypair import Keypair

from devnode.node import Devnode
from gateway.app.settings import Settings
from gateway.auth.cache import NO_ACCOUNT_TTL_S
from gateway.auth.store.nonces import nonce_key
from gateway.runtime.embedded import EmbeddedPostgres
from gateway.storage.migrate import migrate_url
from gateway_client import WalletSigner
from tests.auth.helpers import RPC_BODY, open_session, request, signed
from tests.chain import airdrop, mint_usdc, transfer_usdc, wait_confirmed
from tests.support import TEST_IP_LIMITS, RunningGateway, serve_gateway, service_key_settings
from tests.x402.helpers import confirm_when_final

#: The default budget of failed authentications per address (docs/api.md, Limits).
BUDGET = {"rps": 1, "burst": 100}
EXISTS_QUERY = "SELECT $2 FROM accounts WHERE pubkey = $1"  # AccountStore.exists, constants numbered


@pytest.fixture(scope="module")
def counted_database_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real PostgreSQL that counts each statement it runs (``pg_stat_statements``), migrated."""
    pg = EmbeddedPostgres(tmp_path_factory.mktemp("counted"))
    dsn = pg.start()

    async def preload() -> None:
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
        finally:
            await conn.close()

    asyncio.run(preload())
    pg.stop()
    dsn = pg.start()  # loaded at start only

    async def prepare() -> None:
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        finally:
            await conn.close()
        await migrate_url(dsn)

    asyncio.run(prepare())
    yield dsn
    pg.stop()


@pytest.fixture
async def counted(counted_database_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(counted_database_url)
    yield conn
    await conn.close()


@pytest.fixture
async def budgeted(
    tmp_path: Path, counted_database_url: str, redis_url: str, devnode_url: str
) -> AsyncIterator[RunningGateway]:
    """A gateway on the counting database, with the default failed-authentication budget."""
    settings = Settings.model_validate(
        {
            "home": tmp_path,
            **service_key_settings(tmp_path),
            "database_url": counted_database_url,
            "redis_url": redis_url,
            "upstream_rpc_url": devnode_url,
            "ip_limits": {**TEST_IP_LIMITS, "auth_failures": BUDGET},
        }
    )
    async with serve_gateway(settings) as running:
        yield running


async def exists_queries(db: asyncpg.Connection) -> int:
    """How many times PostgreSQL has run the account-existence query (every connection, since start)."""
    calls = await db.fetchval("SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE query = $1", EXISTS_QUERY)
    return int(calls)


async def test_replays_of_an_accountless_signature_cost_one_query_then_429(
    budgeted: RunningGateway, counted: asyncpg.Connection, redis_client: aioredis.Redis
) -> None:
    signer = WalletSigner(os.urandom(32))
    headers = {"Content-Type": "application/json", **signer.headers("POST", "/", RPC_BODY, nonce="replayed")}
    before = await exists_queries(counted)
    started = time.monotonic()
    statuses: list[int] = []
    last_429: tuple[dict[str, str], dict[str, Any]] | None = None
    async with aiohttp.ClientSession() as http:
        first = await request(http, "POST", budgeted.url + "/", body=RPC_BODY, headers=headers)
        assert (first.status, first.json["error"]["code"]) == (402, -32002), first  # the interface's answer
        assert first.json["error"]["data"]["deposit_address"] == str(budgeted.app.auth.keys.deposit)
        for _ in range(299):
            async with http.post(budgeted.url + "/", data=RPC_BODY, headers=headers) as resp:
                statuses.append(resp.status)
                if resp.status == 429:
                    last_429 = (dict(resp.headers), await resp.json())
    elapsed = time.monotonic() - started
    queries = await exists_queries(counted) - before

    # one query, then one each time the remembered "no" lapses (the 429s make none at all)
    assert 1 <= queries <= 1 + math.ceil(elapsed / NO_ACCOUNT_TTL_S), (queries, elapsed)
    assert 429 in statuses, statuses
    refused = statuses.index(429)  # the budget: 100 at once (less the first call), then 1 a second
    assert refused >= 99 and set(statuses[:refused]) == {402}, statuses
    assert refused <= 99 + math.ceil(elapsed) and set(statuses[refused:]) <= {402, 429}, statuses
    assert last_429 is not None
    headers_429, body_429 = last_429
    assert int(headers_429["Retry-After"]) >= 1 and body_429["error"]["code"] == -32005, body_429  # rate limited
    assert not await redis_client.exists(nonce_key(signer.pubkey, "replayed"))  # nothing stored for a stranger


async def test_a_session_without_an_account_costs_one_query(
    budgeted: RunningGateway, counted: asyncpg.Connection
) -> None:
    """The bearer token of a key without an account: the same 402, remembered the same way."""
    signer = WalletSigner(os.urandom(32))
    async with aiohttp.ClientSession() as http:
        token = await open_session(http, signer, budgeted.url)
        before = await exists_queries(counted)
        started = time.monotonic()
        for _ in range(20):
            answer = await request(
                http, "POST", budgeted.url + "/", body=RPC_BODY, headers={"Authorization": f"Bearer {token}"}
            )
            assert (answer.status, answer.json["error"]["code"]) == (402, -32002), answer
        elapsed = time.monotonic() - started
    assert await exists_queries(counted) - before <= 1 + math.ceil(elapsed / NO_ACCOUNT_TTL_S)


async def test_a_new_accounts_first_call_after_its_deposit_is_served(
    budgeted: RunningGateway, devnode: Devnode, devnode_url: str
) -> None:
    """The "no account" a replica remembers is dropped when the deposit is credited, not left to lapse."""
    budgeted.app.auth.no_accounts.ttl_s = 600.0  # so that only the credit can drop it within this test
    wallet = Keypair()
    signer = WalletSigner(bytes(wallet))
    body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "getSlot"})
    async with aiohttp.ClientSession() as http:
        before = await signed(http, signer, "POST", budgeted.url, "/", body)
        assert (before.status, before.json["error"]["code"]) == (402, -32002), before

        await airdrop(devnode_url, wallet.pubkey())
        async with AsyncClient(devnode_url) as node:
            await mint_usdc(node, devnode.usdc_mint_authority, wallet, wallet.pubkey(), 100_000)
            deposit = await transfer_usdc(node, wallet, budgeted.app.auth.keys.deposit, 50_000)  # 0.05 USDC
            await wait_confirmed(node, deposit, finalized=True)

        still = await signed(http, signer, "POST", budgeted.url, "/", body)  # the transfer is final, not credited
        assert (still.status, still.json["error"]["code"]) == (402, -32002), still
        assert budgeted.app.auth.no_accounts.known(signer.pubkey)

        credited = await confirm_when_final(budgeted.url, wallet, str(deposit))
        assert credited["credits_added"] == 5_000, credited
        assert not budgeted.app.auth.no_accounts.known(signer.pubkey)  # dropped at the credit, not by time
        after = await signed(http, signer, "POST", budgeted.url, "/", body)
    assert after.status == 200 and isinstance(after.json["result"], int), after
