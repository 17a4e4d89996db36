"""The WebSocket tests' fixtures: a gateway in this process in front of the session's devnode (its
PubSub included), with the real PostgreSQL and Redis, and paying callers."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import asyncpg
import pytest

from devnode.node import Devnode
from gateway.core.credits import CreditPolicy, DepositCredit
from gateway.credits.store import credit_deposit_on
from gateway_client import WalletSigner
from tests.auth.helpers import create_api_key
from tests.sending.conftest import payer, sending_settings
from tests.sending.helpers import Caller
from tests.support import RunningGateway, serve_gateway

__all__ = ["caller", "gateway", "new_caller", "payer"]


@pytest.fixture
async def gateway(tmp_path: Path, database_url: str, redis_url: str, devnode: Devnode) -> AsyncIterator[RunningGateway]:
    settings = sending_settings(tmp_path, database_url, redis_url, devnode.rpc_url, upstream_ws_url=devnode.ws_url)
    async with serve_gateway(settings) as gw:
        yield gw


async def new_caller(
    http: aiohttp.ClientSession, gateway: RunningGateway, db: asyncpg.Connection, credits: int
) -> Caller:
    """A caller with an API key and an account holding exactly ``credits`` (a deposit at one credit
    per base unit, below the real minimum, so that a test can start near the WebSocket minimum)."""
    signer = WalletSigner(os.urandom(32))
    key = await create_api_key(http, signer, gateway.url)
    policy = CreditPolicy(credits_per_usdc=10**6, credit_expiry_seconds=3600, minimum_base_units=1)
    deposit = DepositCredit(f"test-deposit-{os.urandom(16).hex()}", signer.pubkey, credits)
    assert (await credit_deposit_on(db, deposit, policy)).credited
    return Caller(http, gateway.url, signer, key)


@pytest.fixture
async def caller(gateway: RunningGateway, db: asyncpg.Connection) -> AsyncIterator[Caller]:
    async with aiohttp.ClientSession() as http:
        yield await new_caller(http, gateway, db, 10_000)
