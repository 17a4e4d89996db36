"""A gateway in this process in front of the session's devnode (its block engine and TPU included),
a paying caller, and a funded payer on the chain."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import asyncpg
import pytest
from solders.keypair import Keypair

from gateway.client import WalletSigner
from gateway.config import Settings
from tests.auth.helpers import create_account, create_api_key
from tests.chain import airdrop
from tests.sending.helpers import Caller
from tests.support import TEST_IP_LIMITS, RunningGateway, serve_gateway


def sending_settings(home: Path, database_url: str, redis_url: str, devnode_url: str, **extra: object) -> Settings:
    return Settings(
        home=home,
        database_url=database_url,
        redis_url=redis_url,
        upstream_rpc_url=devnode_url,
        block_engine_url=f"{devnode_url}/api/v1",
        ip_limits=TEST_IP_LIMITS,
        devnode_slot_ms=100,
        **extra,  # type: ignore[arg-type]
    )


@pytest.fixture
async def gateway(tmp_path: Path, database_url: str, redis_url: str, devnode_url: str) -> AsyncIterator[RunningGateway]:
    async with serve_gateway(sending_settings(tmp_path, database_url, redis_url, devnode_url)) as gw:
        yield gw


@pytest.fixture
async def caller(gateway: RunningGateway, db: asyncpg.Connection) -> AsyncIterator[Caller]:
    signer = WalletSigner(os.urandom(32))
    async with aiohttp.ClientSession() as http:
        key = await create_api_key(http, signer, gateway.url)
        await create_account(db, signer.pubkey)
        yield Caller(http, gateway.url, signer, key)


@pytest.fixture
async def payer(devnode_url: str) -> Keypair:
    keypair = Keypair()
    await airdrop(devnode_url, keypair.pubkey(), 5_000_000_000)
    return keypair
