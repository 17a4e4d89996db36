"""Each leg alone lands a transaction (the others turned off): the node's RPC, the block engine's
relay (a one-transaction bundle, so the transaction must tip), and QUIC to the leader's TPU."""

from __future__ import annotations

import os
from pathlib import Path

import aiohttp
import asyncpg
import pytest
from solders.keypair import Keypair

from gateway_client import WalletSigner
from tests.auth.helpers import create_account, create_api_key
from tests.sending.conftest import sending_settings
from tests.sending.helpers import Caller, b64, latest_blockhash, pay
from tests.support import serve_gateway


@pytest.mark.parametrize("leg", ["local_rpc", "jito", "tpu_quic"])
async def test_one_leg_alone_lands_a_transaction(
    leg: str,
    tmp_path: Path,
    database_url: str,
    redis_url: str,
    devnode_url: str,
    db: asyncpg.Connection,
    payer: Keypair,
) -> None:
    settings = sending_settings(tmp_path, database_url, redis_url, devnode_url, send_legs=[leg])
    signer = WalletSigner(os.urandom(32))
    async with serve_gateway(settings) as gw, aiohttp.ClientSession() as http:
        caller = Caller(http, gw.url, signer, await create_api_key(http, signer, gw.url))
        await create_account(db, signer.pubkey)
        tx = pay(payer, 1_000_000, await latest_blockhash(devnode_url), tip=10_000)
        result = await caller.result("sendAndConfirm", [b64(tx)])

    assert result["status"] == "confirmed", result
    assert result["legs_attempted"] == [leg]


async def test_the_relay_leg_does_not_send_a_transaction_that_does_not_tip(
    tmp_path: Path, database_url: str, redis_url: str, devnode_url: str, db: asyncpg.Connection, payer: Keypair
) -> None:
    """A block engine drops a bundle without a tip: the leg does not count it as sent."""
    settings = sending_settings(tmp_path, database_url, redis_url, devnode_url, send_legs=["jito", "local_rpc"])
    signer = WalletSigner(os.urandom(32))
    async with serve_gateway(settings) as gw, aiohttp.ClientSession() as http:
        caller = Caller(http, gw.url, signer, await create_api_key(http, signer, gw.url))
        await create_account(db, signer.pubkey)
        result = await caller.result(
            "sendAndConfirm", [b64(pay(payer, 1_000_000, await latest_blockhash(devnode_url)))]
        )

    assert result["status"] == "confirmed" and result["legs_attempted"] == ["local_rpc"], result
