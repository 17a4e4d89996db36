"""A suspended account (403 ACCOUNT_SUSPENDED) pays for nothing, still reads its account, and resumes."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import aiohttp
import asyncpg

from gateway.client import WalletSigner
from gateway.config import Settings
from tests.auth.helpers import create_account, create_api_key
from tests.support import serve_gateway, service_key_settings

BODY = b'{"jsonrpc":"2.0","id":1,"method":"getSlot"}'


async def test_suspension_refuses_paid_calls_and_lifts(
    tmp_path: Path, database_url: str, redis_url: str, devnode_url: str, db: asyncpg.Connection
) -> None:
    config = Settings(
        **service_key_settings(tmp_path),
        home=tmp_path,
        database_url=database_url,
        redis_url=redis_url,
        upstream_rpc_url=devnode_url,
    )
    signer = WalletSigner(os.urandom(32))
    async with serve_gateway(config) as gw, aiohttp.ClientSession() as http:
        key = await create_api_key(http, signer, gw.url)
        await create_account(db, signer.pubkey)
        await db.execute("UPDATE accounts SET status = 'suspended' WHERE pubkey = $1", signer.pubkey)
        headers = {"X-Api-Key": key}

        async with http.post(gw.url + "/", data=BODY, headers=headers) as resp:
            doc = await resp.json()
        assert (resp.status, doc["error"]["code"]) == (403, "ACCOUNT_SUSPENDED"), doc
        assert resp.headers["X-Credits-Remaining"] == "10000"  # nothing charged
        async with http.get(gw.url + "/account/info", headers=headers) as resp:
            assert resp.status == 200  # reads stay open

        await db.execute("UPDATE accounts SET status = 'active' WHERE pubkey = $1", signer.pubkey)
        await asyncio.sleep(1.1)  # the replica asks the store again after its 1 s negative cache
        async with http.post(gw.url + "/", data=BODY, headers=headers) as resp:
            assert resp.status == 200, await resp.text()
