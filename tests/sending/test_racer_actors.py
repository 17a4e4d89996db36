"""sendAndConfirm raced by real send-racer Ray actors, and a racer killed in the middle of a race:
the charge held before the broadcast is settled from the chain, never lost.

The gateway and the actors run in a Ray driver of its own (tests/sending/ray_driver.py); this test is
its client, as a user would be, and kills the racer through it once the transaction is on chain.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import aiohttp
import asyncpg
import pytest
from solana.rpc.async_api import AsyncClient
from solders.keypair import Keypair

from gateway.node.http import HttpUpstream
from gateway.sending.reconciler_actor import SendReconciler
from gateway_client import WalletSigner
from tests.auth.helpers import create_account, create_api_key
from tests.sending.conftest import sending_settings
from tests.sending.helpers import Caller, b64, latest_blockhash, pay

LANDING = 10
REPO_ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


async def test_a_racer_killed_mid_race_leaves_a_reconciled_charge(
    tmp_path: Path, database_url: str, redis_url: str, devnode_url: str, db: asyncpg.Connection, payer: Keypair
) -> None:
    settings = sending_settings(tmp_path, database_url, redis_url, devnode_url, send_racers=1)
    driver = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.sending.ray_driver",
        json.dumps(settings.model_dump(mode="json")),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        cwd=str(REPO_ROOT),
    )
    assert driver.stdin is not None and driver.stdout is not None
    signer = WalletSigner(os.urandom(32))
    try:
        url = (await asyncio.wait_for(driver.stdout.readline(), 180)).decode().strip()
        async with aiohttp.ClientSession() as http, AsyncClient(devnode_url) as node:
            caller = Caller(http, url, signer, await create_api_key(http, signer, url))
            await create_account(db, signer.pubkey)
            raced = pay(payer, 1_000_000, await latest_blockhash(devnode_url))
            assert (await caller.result("sendAndConfirm", [b64(raced)]))["status"] == "confirmed"  # by the actor

            tx = pay(payer, 1_000_000, await latest_blockhash(devnode_url))
            call = asyncio.create_task(caller.result("sendAndConfirm", [b64(tx)]))
            for _ in range(1_000):  # until it is broadcast: then kill the racer before it reports
                if (await node.get_signature_statuses([tx.signatures[0]])).value[0] is not None:
                    break
                await asyncio.sleep(0.01)
            driver.stdin.write(b"kill\n")
            await driver.stdin.drain()
            assert (await asyncio.wait_for(driver.stdout.readline(), 60)).strip() == b"killed"
            result = await call
    finally:
        driver.stdin.write(b"done\n")
        await driver.stdin.drain()
        await asyncio.wait_for(driver.wait(), 120)

    signature = str(tx.signatures[0])
    assert result["signature"] == signature and result["status"] in ("unknown", "confirmed"), result
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=2)
    upstream = HttpUpstream(devnode_url)
    try:
        await SendReconciler(pool, upstream, min_age_s=0).run_once()
    finally:
        await upstream.close()
        await pool.close()
    row = await db.fetchrow("SELECT status, charged FROM sends WHERE signature = $1", signature)
    assert (row["status"], row["charged"]) == ("confirmed", LANDING)
    entries = await db.fetch("SELECT amount FROM ledger_entries WHERE ref = $1", signature)
    assert [e["amount"] for e in entries] == [-LANDING]
