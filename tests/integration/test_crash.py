"""A replica killed mid-load: no deposit is lost, the balance stays ≥ 0 and conservation holds.

The replica's process is SIGKILLed while 200 calls are in flight; Serve starts a new one. Usage the
dead replica had not flushed is lost, which only ever favours the customer.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time

import aiohttp
import asyncpg
import pytest
from solders.keypair import Keypair

from gateway.runtime.serve_runtime import processes_naming
from gateway.storage.ledger.audit import check_conservation
from tests.integration.service import (
    INGRESS_REPLICA,
    RunningService,
    confirm_deposit,
    create_api_key,
    deposit_usdc,
    health,
)

pytestmark = pytest.mark.integration

BODY = b'{"jsonrpc":"2.0","id":1,"method":"getSlot"}'
BALANCE = "SELECT balance FROM accounts WHERE pubkey = $1"


def replica_pids(service: RunningService) -> list[int]:
    """The service's live ingress replicas (a killed one stays a zombie until Ray reaps it: not a match)."""
    return [proc.pid for proc in processes_naming(INGRESS_REPLICA, among=service.descendants())]


async def hammer(url: str, key: str, count: int, per_second: float = 40.0) -> list[int]:
    """``count`` calls paced at ``per_second`` (under the 50/s account limit); status 0 = connection lost."""
    async with aiohttp.ClientSession() as http:

        async def one(delay: float) -> int:
            await asyncio.sleep(delay)
            try:
                async with http.post(url, data=BODY, headers={"X-Api-Key": key}) as resp:
                    await resp.read()
                    return resp.status
            except aiohttp.ClientError:
                return 0  # the connection died with the replica

        return list(await asyncio.gather(*(one(i / per_second) for i in range(count))))


async def test_killed_replica_loses_nothing_that_matters(service: RunningService) -> None:
    wallet = Keypair()
    key = await asyncio.to_thread(create_api_key, service.url, wallet)
    signature = await asyncio.to_thread(deposit_usdc, service, wallet, 100_000)  # 10,000 credits
    await asyncio.to_thread(confirm_deposit, service, signature, {"X-Api-Key": key})
    victims = replica_pids(service)
    assert victims, "no replica process found"

    load = asyncio.create_task(hammer(f"{service.url}/", key, 160))  # 4 s of traffic
    await asyncio.sleep(1.0)
    for pid in victims:
        os.kill(pid, signal.SIGKILL)
    statuses = await load
    assert statuses.count(200) >= 20 and any(code != 200 for code in statuses), statuses  # killed mid-load

    deadline = time.monotonic() + 90
    while not (replica_pids(service) and await asyncio.to_thread(health, service.url) == 200):
        assert time.monotonic() < deadline, "Serve did not replace the replica"
        await asyncio.sleep(0.5)
    after = await hammer(f"{service.url}/", key, 5)
    assert after.count(200) >= 1, after

    conn = await asyncpg.connect(f"postgresql://postgres:@/gateway?host={service.home / 'postgres'}")
    try:
        deadline = time.monotonic() + 30  # the new replica's usage reaches the ledger within a flush (1 s)
        while (balance := await conn.fetchval(BALANCE, str(wallet.pubkey()))) > 10_000 - after.count(200):
            assert time.monotonic() < deadline, f"the calls after recovery were never charged: {balance}"
            await asyncio.sleep(0.25)
        assert balance >= 0
        report = await check_conservation(conn, str(wallet.pubkey()))
        assert report.ok, report
        deposit = await conn.fetchrow("SELECT status, credits FROM deposits WHERE signature = $1", signature)
        assert deposit is not None and (deposit["status"], deposit["credits"]) == ("credited", 10_000)
    finally:
        await conn.close()
