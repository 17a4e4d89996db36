"""The x402 tests' fixtures, on the real parts: a gateway in this process (real PostgreSQL and Redis) in
front of a relay to the session devnode that counts what is broadcast, its fee payer funded with SOL
and its deposit account created (as ``gateway up`` does on the devnode), and wallets holding test USDC."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest
from solana.rpc.async_api import AsyncClient
from solders.keypair import Keypair
from spl.token.instructions import create_idempotent_associated_token_account

from devnode.node import Devnode
from gateway.app.settings import Settings
from tests.chain import USDC_MINT, airdrop, mint_usdc, send
from tests.sending.conftest import FailingRelay
from tests.support import TEST_IP_LIMITS, serve_gateway, service_key_settings
from tests.x402.helpers import Settle

FEE_PAYER_LAMPORTS = 1_000_000_000
WALLET_USDC = 1_000_000  # 1 USDC


def x402_settings(home: Path, database_url: str, redis_url: str, node_url: str, **extra: object) -> Settings:
    return Settings.model_validate(
        {
            "home": home,
            **service_key_settings(home),
            "database_url": database_url,
            "redis_url": redis_url,
            "upstream_rpc_url": node_url,
            "ip_limits": TEST_IP_LIMITS,
            "devnode_slot_ms": 100,
            **extra,
        }
    )


@pytest.fixture(scope="module")
async def node(devnode_url: str) -> AsyncIterator[AsyncClient]:
    async with AsyncClient(devnode_url) as client:
        yield client


@asynccontextmanager
async def settling(
    home: Path, database_url: str, redis_url: str, devnode: Devnode, node: AsyncClient, **extra: object
) -> AsyncIterator[Settle]:
    """A gateway in front of a relay to the devnode, its fee payer funded and its deposit account made."""
    relay = FailingRelay(devnode.rpc_url)
    await relay.start()
    settings = x402_settings(home, database_url, redis_url, f"http://127.0.0.1:{relay.port}/", **extra)
    try:
        async with serve_gateway(settings) as gw, aiohttp.ClientSession() as http:
            settle = Settle(gw.url, gw.app, relay, node, http, devnode.usdc_mint_authority)
            await airdrop(devnode.rpc_url, settle.fee_payer, FEE_PAYER_LAMPORTS)
            funder = Keypair()
            await airdrop(devnode.rpc_url, funder.pubkey())
            create = create_idempotent_associated_token_account(funder.pubkey(), settle.deposit_wallet, USDC_MINT)
            await send(node, funder, [create])
            yield settle
    finally:
        await relay.stop()


@pytest.fixture(scope="module")
async def x402(
    tmp_path_factory: pytest.TempPathFactory,
    database_url: str,
    redis_url: str,
    devnode: Devnode,
    node: AsyncClient,
) -> AsyncIterator[Settle]:
    async with settling(tmp_path_factory.mktemp("x402"), database_url, redis_url, devnode, node) as settle:
        yield settle


@pytest.fixture
async def wallet(x402: Settle, devnode_url: str) -> Keypair:
    """A wallet with SOL and 1 test USDC."""
    keypair = Keypair()
    await airdrop(devnode_url, keypair.pubkey())
    await mint_usdc(x402.node, x402.usdc_authority, keypair, keypair.pubkey(), WALLET_USDC)
    return keypair
