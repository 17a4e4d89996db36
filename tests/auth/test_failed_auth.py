"""Failed authentications are bounded per client address, and unknown keys stay out of the valid
keys' cache: a gateway of this module's own (a small ``auth_failures`` bucket), served by uvicorn in
this process, the session's PostgreSQL and Redis, real HTTP and WebSocket clients. A second client
address is a second loopback address (127.0.0.2, and the spray's own 127.0.0.3), as the kernel gives it.

The PostgreSQL lookups of API keys are counted by wrapping the store's row reader (the real query
still runs): the count is the thing bounded.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable

import aiohttp
import asyncpg
import orjson
import pytest
import redis.asyncio as aioredis
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from gateway.app.settings import Settings
from gateway.auth.api_keys import ApiKeyStore, generate_api_key
from gateway.auth.store.accounts import ApiKeyRows
from gateway.core.errors import RpcCode
from gateway.storage.channels import REVOKED_KEYS, Channel
from gateway_client import WalletSigner
from tests.auth.helpers import create_account, create_api_key
from tests.support import TEST_IP_LIMITS, RunningGateway, serve_gateway, service_key_settings

BURST = 40
SPRAY = 600
OTHER_ADDRESS = "127.0.0.2"
#: The spray's own address: the module's other tests fill 127.0.0.1's bucket, and may run first (a shuffled run).
SPRAY_ADDRESS = "127.0.0.3"


@pytest.fixture(scope="module")
async def gateway(
    tmp_path_factory: pytest.TempPathFactory, database_url: str, redis_url: str, devnode_url: str
) -> AsyncIterator[RunningGateway]:
    home = tmp_path_factory.mktemp("failed-auth")
    settings = Settings.model_validate(
        {
            "home": home,
            **service_key_settings(home),
            "database_url": database_url,
            "redis_url": redis_url,
            "upstream_rpc_url": devnode_url,
            "ip_limits": {**TEST_IP_LIMITS, "auth_failures": {"rps": 0.01, "burst": BURST}},
        }
    )
    async with serve_gateway(settings) as running:
        yield running


class Lookups:
    """Counts the API-key rows read from PostgreSQL (the real reader still answers)."""

    def __init__(self, store: ApiKeyStore) -> None:
        self.count = 0
        rows = store._rows
        real: Callable[[bytes], Awaitable[str | None]] = rows.owner

        async def owner(digest: bytes) -> str | None:
            self.count += 1
            return await real(digest)

        rows.owner = owner  # type: ignore[method-assign,assignment]


async def rpc(http: aiohttp.ClientSession, url: str, key: str) -> aiohttp.ClientResponse:
    body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "getSlot"})
    async with http.post(url + "/", data=body, headers={"X-Api-Key": key, "Content-Type": "application/json"}) as resp:
        await resp.read()
        return resp


def from_address(address: str) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(local_addr=(address, 0)))


async def test_a_spray_of_unknown_keys_is_refused_429_past_the_bound(
    gateway: RunningGateway, db: asyncpg.Connection
) -> None:
    store = gateway.app.auth.api_keys
    assert store is not None
    signer = WalletSigner(os.urandom(32))
    await create_account(db, signer.pubkey)
    async with from_address(SPRAY_ADDRESS) as http:
        real_key = await create_api_key(http, signer, gateway.url)
        assert (await rpc(http, gateway.url, real_key)).status == 200  # cached from now on
        lookups = Lookups(store)

        statuses = []
        for _ in range(SPRAY):
            async with http.post(
                gateway.url + "/",
                json={"jsonrpc": "2.0", "id": 1, "method": "getSlot"},
                headers={"X-Api-Key": generate_api_key()},
            ) as resp:
                body = await resp.json()
                statuses.append(resp.status)
                if resp.status == 429:
                    last_refusal = (resp.headers.get("Retry-After"), body)
        assert statuses[:BURST] == [401] * BURST
        assert statuses.count(401) <= BURST + 1  # the failure that finds the bucket empty is the last one
        assert statuses[BURST + 1 :] == [429] * (SPRAY - BURST - 1)
        retry_after, body = last_refusal
        assert retry_after is not None and int(retry_after) >= 1
        assert body["error"]["code"] == RpcCode.RATE_LIMITED
        assert body["error"]["data"]["retry_after_secs"] == int(retry_after)
        assert "failed authentications" in body["error"]["message"]
        assert lookups.count <= BURST + 1  # the refused ones never reached PostgreSQL

        # The real key is still cached (no lookup), even from the sprayer's address.
        assert (await rpc(http, gateway.url, real_key)).status == 200
        assert lookups.count <= BURST + 1
        assert all(owner is not None for _, (_, owner) in store._cache._entries.items())

    async with from_address(OTHER_ADDRESS) as other:
        assert (await rpc(other, gateway.url, generate_api_key())).status == 401  # its own failures, not 429
        assert (await rpc(other, gateway.url, real_key)).status == 200


async def test_a_blocked_address_gets_4003_on_the_socket(gateway: RunningGateway) -> None:
    """Runs after the spray above (same module gateway): the address is still blocked."""
    url = gateway.url.replace("http://", "ws://") + "/ws"
    async with aiohttp.ClientSession() as http:
        for _ in range(BURST + 2):  # make sure the address is over its bound whatever ran before
            await rpc(http, gateway.url, generate_api_key())
    async with connect(url, additional_headers={"X-Api-Key": generate_api_key()}) as ws:
        with pytest.raises(ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), 30)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4003
    assert "failed authentications" in closed.value.rcvd.reason


async def test_a_blocked_address_gets_429_on_mcp(gateway: RunningGateway) -> None:
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    headers = {"Accept": "application/json, text/event-stream"}
    async with aiohttp.ClientSession() as http:
        for _ in range(BURST + 2):  # make sure the address is over its bound whatever ran before
            await rpc(http, gateway.url, generate_api_key())
        async with http.post(
            gateway.url + "/mcp", json=initialize, headers={**headers, "X-Api-Key": generate_api_key()}
        ) as resp:
            assert resp.status == 429, await resp.text()
            assert int(resp.headers["Retry-After"]) >= 1


async def test_unknown_keys_do_not_push_real_ones_out_of_the_cache(
    database_url: str, redis_client: aioredis.Redis
) -> None:
    """A store with room for 8 keys: 50 unknown keys looked up after a real one leave it cached."""
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=2)
    store = ApiKeyStore(ApiKeyRows(pool), Channel(redis_client, REVOKED_KEYS), os.urandom(32), cache_size=8)
    try:
        await store.start()
        signer = WalletSigner(os.urandom(32))
        key = await store.rotate(signer.pubkey, None)
        assert await store.lookup(key) == signer.pubkey
        lookups = Lookups(store)
        for _ in range(50):
            assert await store.lookup(generate_api_key()) is None
        assert lookups.count == 50
        assert store.cached(key) == signer.pubkey
        assert await store.lookup(key) == signer.pubkey
        assert lookups.count == 50  # served from the cache
        unknown = generate_api_key()
        assert await store.lookup(unknown) is None
        assert await store.lookup(unknown) is None  # a repeated unknown key is remembered briefly
        assert lookups.count == 51
    finally:
        await store.stop()
        await pool.close()
