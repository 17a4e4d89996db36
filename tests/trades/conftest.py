"""The trade builders' fixtures: a devnode with its launch feed on (real pump.fun-shaped curves, classic and
v2, SOL- and USDC-quoted, some completed), a gateway in this process in front of it, and traders: wallets
whose keypair the test holds (to sign what the gateway builds), funded with SOL on the chain and with
credits at the gateway, and an API key each."""

from __future__ import annotations

import asyncio
import bisect
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import asyncpg
import pytest
from solders.keypair import Keypair
from solders.pubkey import Pubkey

from devnode.node import Devnode
from gateway_client import WalletSigner
from tests.auth.helpers import create_account, create_api_key
from tests.chain import airdrop
from tests.feed import feed_devnode
from tests.sending.conftest import sending_settings
from tests.sending.helpers import Caller
from tests.support import RunningGateway, serve_gateway
from tests.trades.coins import Coin, coins

#: 1 USDC: 100,000 credits, enough for any build these tests make.
TRADER_USDC = 1_000_000
TRADER_LAMPORTS = 20_000_000_000


@dataclass
class Trader:
    keypair: Keypair
    caller: Caller

    @property
    def pubkey(self) -> str:
        return str(self.keypair.pubkey())


@pytest.fixture(scope="package")
async def feed_node(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Devnode]:
    async with feed_devnode(tmp_path_factory.mktemp("trades-feed")) as node:
        yield node


@pytest.fixture(scope="package")
async def node_url(feed_node: Devnode) -> str:
    return feed_node.rpc_url


@pytest.fixture(scope="package")
async def trade_gateway(
    feed_node: Devnode, tmp_path_factory: pytest.TempPathFactory, database_url: str, redis_url: str
) -> AsyncIterator[RunningGateway]:
    home: Path = tmp_path_factory.mktemp("trades-gateway")
    async with serve_gateway(sending_settings(home, database_url, redis_url, feed_node.rpc_url)) as gw:
        yield gw


async def new_trader(
    http: aiohttp.ClientSession, url: str, node: str, db: asyncpg.Connection, *, usdc: int = TRADER_USDC
) -> Trader:
    keypair = Keypair()
    signer = WalletSigner(bytes(keypair))
    key = await create_api_key(http, signer, url)
    await create_account(db, signer.pubkey, usdc)
    await airdrop(node, keypair.pubkey(), TRADER_LAMPORTS)
    return Trader(keypair, Caller(http, url, signer, key))


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
async def trader(
    http: aiohttp.ClientSession, trade_gateway: RunningGateway, node_url: str, db: asyncpg.Connection
) -> Trader:
    return await new_trader(http, trade_gateway.url, node_url, db)


async def wait_for_coin(node_url: str, wanted: Callable[[Coin], bool], what: str, timeout_s: float = 90.0) -> Coin:
    """The first coin on the chain that ``wanted`` accepts, waiting for the feed to make one."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        found = [c for c in await coins(node_url) if wanted(c)]
        if found:
            return found[0]
        assert asyncio.get_running_loop().time() < deadline, f"the feed made no {what} within {timeout_s:g} s"
        await asyncio.sleep(0.5)


#: The feed trades only its 12 newest live coins (``devnode/feed/launch.py``, ``_pick_coin``); 4 more in case
#: some of the newer ones complete their curve while a test uses the older one.
NEWER_COINS = 16

#: Per node, each coin this process has seen and the number of the read that first showed it: a coin first
#: shown by a later read was made after every coin of an earlier one (the feed makes them one at a time).
_first_read: dict[str, dict[Pubkey, int]] = {}


async def quiet_coin(node_url: str, wanted: Callable[[Coin], bool], what: str, timeout_s: float = 150.0) -> Coin:
    """A live coin the feed will no longer trade, so that a test's quote still holds when its transaction
    lands: one ``NEWER_COINS`` live coins are known to be newer than (first seen by a later read of this
    process). Choosing a coin whose curve had not moved for a few seconds was not enough: a CI run picked
    one of the feed's newest coins, which the feed traded between a sell's quote and its landing."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    first_read = _first_read.setdefault(node_url, {})
    while True:
        now = await coins(node_url)
        read = max(first_read.values(), default=-1) + 1
        for coin in now:
            first_read.setdefault(coin.mint, read)
        live_reads = sorted(first_read[c.mint] for c in now if c.live)
        for coin in sorted((c for c in now if wanted(c)), key=lambda c: first_read[c.mint]):
            newer = len(live_reads) - bisect.bisect_right(live_reads, first_read[coin.mint])
            if newer >= NEWER_COINS:
                return coin
        assert loop.time() < deadline, f"no {what} with {NEWER_COINS} live coins newer within {timeout_s:g} s"
        await asyncio.sleep(1.0)
