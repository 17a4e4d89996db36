"""A user's pump.fun buy while the devnode's launch feed runs on its timer (tests/feed.py): the feed's next trade
on that coin starts from the curve as the user's buy left it, and moves each account by exactly its own amounts
(no stale write of the feed's view over the user's trade)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from solana.rpc.async_api import AsyncClient
from solders.pubkey import Pubkey
from solders.signature import Signature

from pumpfun.events import CreateEvent, TradeEvent
from pumpfun.ids import PUMP_PROGRAM_ID
from tests.devnode.test_pump_exec import (
    PumpClient,
    PumpCoin,
    balance_change,
    buy_ixs,
    instruction_error,
    program_events,
    quoted,
    trade_events,
)
from tests.feed import feed_devnode, node_rpc


@pytest.fixture
async def pump(tmp_path: Path) -> AsyncIterator[PumpClient]:
    async with feed_devnode(tmp_path / "devnode") as node, AsyncClient(node.rpc_url) as client:
        yield PumpClient(node.rpc_url, client)


async def _signatures(pump: PumpClient, address: Pubkey) -> list[str]:
    listed = await node_rpc(pump.rpc_url, "getSignaturesForAddress", [str(address), {"commitment": "confirmed"}])
    return [entry["signature"] for entry in listed if entry["err"] is None]


async def _newest_coin(pump: PumpClient, timeout_s: float = 30.0) -> PumpCoin:
    """The newest SOL-quoted coin the feed created (the feed trades its newest coins most)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while asyncio.get_running_loop().time() < deadline:
        for sig in await _signatures(pump, PUMP_PROGRAM_ID):
            logs = (await pump.transaction(Signature.from_string(sig)))["meta"]["logMessages"]
            for event in program_events(logs):
                if isinstance(event, CreateEvent) and event.quote_mint == Pubkey.default():
                    return PumpCoin(event.mint, event.token_program)
        await asyncio.sleep(0.3)
    raise AssertionError("the feed created no coin")


async def _next_trade_after(pump: PumpClient, coin: PumpCoin, ours: Signature, timeout_s: float = 60.0) -> str:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while asyncio.get_running_loop().time() < deadline:
        newest_first = await _signatures(pump, coin.bonding_curve)
        later = newest_first[: newest_first.index(str(ours))]
        if later:
            return later[-1]
        await asyncio.sleep(0.2)
    raise AssertionError("the feed did not trade the coin again")


async def test_the_running_feed_trades_on_from_the_users_buy(pump: PumpClient) -> None:
    coin = await _newest_coin(pump)
    user = await pump.wallet()
    q = await quoted(pump, coin)
    tokens = 10**12
    # The feed may trade the coin before this lands: allow for it; the amount of tokens is what is exact.
    ours = await pump.send(user, buy_ixs(user.pubkey(), coin, q, tokens, 2 * q.buy(tokens).total_cost))
    tx = await pump.transaction(ours)
    assert instruction_error(tx) is None, tx["meta"]["logMessages"]
    [mine] = trade_events(tx)
    assert mine.token_amount == tokens
    held = await pump.tokens(coin.user_ata(user.pubkey()))
    assert held == tokens

    nxt = await pump.transaction(Signature.from_string(await _next_trade_after(pump, coin, ours)))
    [theirs] = trade_events(nxt)
    before: TradeEvent = mine  # the curve as the user's buy left it
    sign = 1 if theirs.is_buy else -1
    assert theirs.virtual_token_reserves + sign * theirs.token_amount == before.virtual_token_reserves
    assert theirs.virtual_sol_reserves - sign * theirs.sol_amount == before.virtual_sol_reserves
    assert theirs.real_sol_reserves - sign * theirs.sol_amount == before.real_sol_reserves
    assert balance_change(nxt, coin.bonding_curve) == sign * theirs.sol_amount
    assert balance_change(nxt, theirs.fee_recipient) == theirs.fee
    assert await pump.tokens(coin.user_ata(user.pubkey())) == held
