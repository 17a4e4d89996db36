"""The live SOL/USD rate: read from the SOL/USDC pool the devnode hosts (a PumpSwap-layout pool with real
reserves), named in /pricing, following the pool's reserves, the configured rate when the pool cannot be
read, and read once for every trade build (and ``/pricing`` call) that finds it stale at the same time.

The node reads are counted by the counting relay of tests/transports/test_pricing.py in front of the real
devnode (it forwards every request as it came; no stand-in answers anything)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest
from aiohttp import web
from solders.account import Account
from solders.keypair import Keypair

from devnode.chain.constants import USDC_MINT
from devnode.node import Devnode
from devnode.sol_usd_pool import POOL_SOL_LAMPORTS, POOL_USDC_UNITS, SOL_USD_POOL, pool_accounts
from gateway.base.config import DEVNODE_SOL_USD_POOL
from gateway.node.http import HttpUpstream
from gateway.trades.pool import PoolUnreadable, micro_usd_per_sol, pool_of, reserves_to_read
from gateway.trades.sol_usd import ConfiguredRate, PoolRate
from pumpfun import pda, spl
from pumpfun.ids import TOKEN_PROGRAM_ID, WSOL_MINT
from tests.sending.conftest import sending_settings
from tests.support import RunningGateway, serve_gateway
from tests.trades.coins import Coin
from tests.trades.conftest import new_trader, wait_for_coin
from tests.transports.test_pricing import CountingRelay

pytestmark = pytest.mark.integration


def test_the_gateway_defaults_to_the_pool_the_devnode_hosts() -> None:
    assert str(SOL_USD_POOL) == DEVNODE_SOL_USD_POOL
    (_, pool), *_ = pool_accounts()
    sides = reserves_to_read(pool_of(pool.owner, bytes(pool.data)), USDC_MINT)
    assert sides.sol_account == pda.associated_token_address(SOL_USD_POOL, WSOL_MINT, TOKEN_PROGRAM_ID)
    with pytest.raises(PoolUnreadable):
        reserves_to_read(pool_of(pool.owner, bytes(pool.data)), Keypair().pubkey())  # not against USDC
    mint_9, mint_6 = spl.pack_mint(0, 9), spl.pack_mint(0, 6)
    sol = spl.pack_token_account(spl.TokenAccountState(WSOL_MINT, SOL_USD_POOL, 3 * 10**9))
    usd = spl.pack_token_account(spl.TokenAccountState(USDC_MINT, SOL_USD_POOL, 400_000_001))
    assert micro_usd_per_sol(sol, usd, mint_9, mint_6) == 133_333_333  # $400.000001 / 3 SOL, rounded down


async def test_pricing_names_the_pool_its_rate_comes_from(trade_gateway: RunningGateway) -> None:
    async with aiohttp.ClientSession() as http, http.get(f"{trade_gateway.url}/pricing") as resp:
        doc = await resp.json()
    trade = doc["trade_builders"]
    rate = POOL_USDC_UNITS * 10**9 * 10**6 // (POOL_SOL_LAMPORTS * 10**6)
    assert trade["sol_usd"]["rate"] == trade["sol_usd_micro"] == rate == 150_000_000
    assert trade["sol_usd"]["source"] == trade["rate_source"] == f"pool:{SOL_USD_POOL}"
    assert isinstance(trade["sol_usd"]["as_of"], int)


async def test_the_rate_follows_the_pool_and_falls_back_without_it(feed_node: Devnode) -> None:
    node = HttpUpstream(feed_node.rpc_url)
    fallback = ConfiguredRate(99_000_000)
    try:
        live = await PoolRate(node, SOL_USD_POOL, USDC_MINT, fallback).rate()
        assert (live.micro_usd_per_sol, live.source) == (150_000_000, f"pool:{SOL_USD_POOL}")

        usdc_account = pda.associated_token_address(SOL_USD_POOL, USDC_MINT, TOKEN_PROGRAM_ID)
        before = feed_node.chain.get_account(usdc_account)
        assert before is not None
        thinner = spl.pack_token_account(spl.TokenAccountState(USDC_MINT, SOL_USD_POOL, 1_234_567 * 10**6))
        feed_node.chain.set_genesis_account(usdc_account, Account(before.lamports, thinner, before.owner))
        try:  # the pool's price moved: so does the rate
            assert (await PoolRate(node, SOL_USD_POOL, USDC_MINT, fallback).rate()).micro_usd_per_sol == 123_456_700
        finally:
            feed_node.chain.set_genesis_account(usdc_account, before)

        absent = await PoolRate(node, Keypair().pubkey(), USDC_MINT, fallback).rate()
        assert (absent.micro_usd_per_sol, absent.source) == (99_000_000, "configured")
        not_a_pool = await PoolRate(node, USDC_MINT, USDC_MINT, fallback).rate()  # an account, not a pool
        assert not_a_pool.source == "configured"
        down = HttpUpstream("http://127.0.0.1:9")
        try:
            assert (await PoolRate(down, SOL_USD_POOL, USDC_MINT, fallback).rate()).source == "configured"
        finally:
            await down.close()
    finally:
        await node.close()


#: Concurrent trade builds, and ``/pricing`` calls beside them, that find the rate stale.
BUILDS = 10
PRICINGS = 5
#: How long the relay holds each read of the pool: the first read is still out when every build asks.
HOLD_S = 1.0


class SlowPoolRelay(CountingRelay):
    """The counting relay, holding each read that names the SOL/USD pool for ``HOLD_S`` (a slow node), and
    counting those reads: one per rate read (the second read of each, the pool's token accounts, does not
    name it)."""

    def __init__(self, node_url: str) -> None:
        super().__init__(node_url)
        self.pool_reads = 0

    async def _relay(self, request: web.Request) -> web.StreamResponse:
        if str(SOL_USD_POOL).encode() in await request.read():
            self.pool_reads += 1
            await asyncio.sleep(HOLD_S)
        return await super()._relay(request)


def live(coin: Coin) -> bool:
    return coin.live and coin.sol_quoted and coin.curve.real_token_reserves > 10**14


async def test_concurrent_builds_on_a_stale_rate_share_one_node_read(
    feed_node: Devnode, tmp_path: Path, database_url: str, redis_url: str, db: asyncpg.Connection
) -> None:
    async with SlowPoolRelay(feed_node.rpc_url) as relay:
        settings = sending_settings(tmp_path, database_url, redis_url, relay.url, trade_sol_usd_ttl_s=3_600)
        async with serve_gateway(settings) as gw, aiohttp.ClientSession() as http:
            trader = await new_trader(http, gw.url, feed_node.rpc_url, db)
            snipe = [
                {
                    "mint": str((await wait_for_coin(feed_node.rpc_url, live, "live SOL curve")).mint),
                    "amount_sol": 0.001,
                }
            ]
            assert relay.pool_reads == 0  # nothing read the rate yet: the first build finds it stale

            async def pricing() -> dict[str, Any]:
                async with http.get(f"{gw.url}/pricing") as resp:
                    assert resp.status == 200
                    doc: dict[str, Any] = await resp.json()
                    return doc

            built, priced = await asyncio.gather(
                asyncio.gather(*(trader.caller.rpc("executeSnipe", snipe) for _ in range(BUILDS))),
                asyncio.gather(*(pricing() for _ in range(PRICINGS))),
            )
    assert all(status == 200 and "result" in doc for status, doc, _ in built), built
    assert {doc["result"]["fee_credits"] for _, doc, _ in built} == {65}  # 50 + 0.001 SOL x $150 x 0.1%
    assert {doc["trade_builders"]["rate_source"] for doc in priced} == {f"pool:{SOL_USD_POOL}"}
    assert relay.pool_reads == 1, relay.methods  # one read of the rate for all of them
