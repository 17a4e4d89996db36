"""An account with no credits (``POST /account/api-key`` makes one for free) gets its 402 before the trade
builders read the node: through a relay in front of the real devnode that keeps every body it forwards."""

from __future__ import annotations

import os
from pathlib import Path

import aiohttp
import asyncpg
from solders.pubkey import Pubkey

from gateway_client import WalletSigner
from tests.auth.helpers import create_api_key
from tests.sending.conftest import FailingRelay, sending_settings
from tests.sending.helpers import Caller
from tests.support import serve_gateway


async def test_an_unfunded_account_gets_402_before_any_node_read(
    devnode_url: str, tmp_path: Path, database_url: str, redis_url: str, db: asyncpg.Connection
) -> None:
    relay = FailingRelay(devnode_url)
    await relay.start()
    try:
        settings = sending_settings(tmp_path, database_url, redis_url, f"http://127.0.0.1:{relay.port}/")
        async with serve_gateway(settings) as gw, aiohttp.ClientSession() as http:
            signer = WalletSigner(os.urandom(32))
            caller = Caller(http, gw.url, signer, await create_api_key(http, signer, gw.url))  # no deposit
            assert await db.fetchval("SELECT balance FROM accounts WHERE pubkey = $1", signer.pubkey) == 0
            mint = str(Pubkey.new_unique())
            for method, params in (
                ("executeSnipe", {"mint": mint, "amount_sol": 0.1}),
                ("executeSell", {"mint": mint, "token_amount": 1}),
                ("executeSnipe", {"mint": mint, "amount_sol": 0.1}),  # the second from the replica's cached answer
            ):
                status, doc, remaining = await caller.rpc(method, [params])
                assert (status, doc["error"]["code"], remaining) == (402, -32010, 0), doc
    finally:
        await relay.stop()
    assert relay.count("getMultipleAccounts") == 0  # no curve was read for an account that cannot pay
