"""Every curve kind end to end: a curve whose own quote mint is wrapped SOL bought with ``buy_v2`` and sold with
``sell_v2``, and the budget buys (``exact_in``: ``buy_exact_sol_in`` on a SOL coin, ``buy_exact_quote_in_v2``
on a wSOL curve), each built by the gateway, signed by a test wallet with solders, sent with solana-py and
executed by the devnode. The wallet, the curve and the curve's quote account move by exactly what the curve
math says, and a budget buy spends the budget."""

from __future__ import annotations

from typing import Any

import pytest
from solana.rpc.async_api import AsyncClient
from solders.instruction import Instruction
from solders.pubkey import Pubkey

from pumpfun import pda, spl
from pumpfun.curve import buy_quote, sell_quote
from pumpfun.exact_in import exact_in_quote
from pumpfun.fees import fee_rates
from pumpfun.ids import PUMP_PROGRAM_ID, TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID, WSOL_MINT
from pumpfun.instructions import BUY_DISCRIMINATOR, BUY_EXACT_SOL_IN_DISCRIMINATOR
from pumpfun.instructions_v2 import (
    BUY_EXACT_QUOTE_IN_V2_DISCRIMINATOR,
    BUY_V2_DISCRIMINATOR,
    SELL_V2_DISCRIMINATOR,
    quote_side,
    trade_v2_accounts,
)
from tests.chain import wait_confirmed
from tests.trades.coins import Coin, account_bytes, curve_of, pump_global, token_amount
from tests.trades.conftest import Trader, quiet_coin
from tests.trades.decode import instructions_of, unsigned
from tests.trades.test_end_to_end import build, fee_of, lamports, send

pytestmark = pytest.mark.integration

TOKEN_ACCOUNT_RENT = spl.rent_exempt_minimum(spl.TOKEN_ACCOUNT_SIZE)
MAX_TX_BYTES = 1232


def wsol_curve(c: Coin) -> bool:
    return c.live and c.curve.quote_mint == WSOL_MINT and c.curve.real_token_reserves > 10**14


def sol_coin(c: Coin) -> bool:
    return c.live and c.sol_quoted and c.token_program == TOKEN_PROGRAM_ID and c.curve.real_token_reserves > 10**14


def pump_ix(encoded: str) -> Instruction:
    (ix,) = [ix for ix in instructions_of(unsigned(encoded)) if ix.program_id == PUMP_PROGRAM_ID]
    return ix


async def missing(node_url: str, *addresses: Pubkey) -> int:
    return sum([await account_bytes(node_url, a) is None for a in addresses])


async def land(trader: Trader, node_url: str, built: dict[str, Any]) -> int:
    """Send the built transaction, wait for it; its fee."""
    assert len(bytes(unsigned(built["unsigned_tx_base64"]))) <= MAX_TX_BYTES
    signature = await send(trader, built["unsigned_tx_base64"])
    async with AsyncClient(node_url) as node:
        await wait_confirmed(node, signature)
    return await fee_of(node_url, signature)


async def test_a_wsol_curve_is_bought_with_buy_v2_and_sold_with_sell_v2(trader: Trader, node_url: str) -> None:
    coin = await quiet_coin(node_url, wsol_curve, "quiet wSOL-quoted curve")
    user = trader.keypair.pubkey()
    curve_quote = pda.associated_token_address(coin.address, WSOL_MINT, TOKEN_PROGRAM_ID)
    global_, before = await pump_global(node_url), await curve_of(node_url, coin.mint)
    rates = fee_rates(global_, before)
    pooled = await token_amount(node_url, coin.address, WSOL_MINT, TOKEN_PROGRAM_ID)

    snipe = await build(trader, "executeSnipe", {"mint": str(coin.mint), "amount_sol": "0.25"})
    assert (snipe["instruction"], snipe["quote"]) == ("buy_v2", "wSOL")
    ix = pump_ix(snipe["unsigned_tx_base64"])
    assert bytes(ix.data[:8]) == BUY_V2_DISCRIMINATOR
    fee_recipient, buyback = ix.accounts[6].pubkey, ix.accounts[8].pubkey
    expected = trade_v2_accounts(
        coin.mint,
        user,
        before.creator,
        fee_recipient,
        buyback,
        quote_side(WSOL_MINT),
        TOKEN_2022_PROGRAM_ID,
        is_buy=True,
    )
    assert list(ix.accounts) == expected
    fee_accounts = await missing(node_url, ix.accounts[7].pubkey, ix.accounts[17].pubkey)
    sol_before = await lamports(node_url, user)

    fee = await land(trader, node_url, snipe)
    held = await token_amount(node_url, user, coin.mint, TOKEN_2022_PROGRAM_ID)
    assert held == snipe["tokens_out"] > 0
    bought = buy_quote(before.reserves, held, rates)
    assert (await curve_of(node_url, coin.mint)).reserves == bought.after
    assert await token_amount(node_url, coin.address, WSOL_MINT, TOKEN_PROGRAM_ID) == pooled + bought.sol_amount
    assert (await account_bytes(node_url, curve_quote)) is not None
    assert await account_bytes(node_url, pda.associated_token_address(user, WSOL_MINT)) is None  # unwrapped
    spent = sol_before - await lamports(node_url, user)
    base_account_rent = spl.rent_exempt_minimum(spl.TOKEN_2022_ACCOUNT_SIZE)
    assert spent == bought.total_cost + fee + base_account_rent + fee_accounts * TOKEN_ACCOUNT_RENT

    sell = await build(trader, "executeSell", {"mint": str(coin.mint), "token_amount": str(held)})
    assert sell["instruction"] == "sell_v2"
    ix = pump_ix(sell["unsigned_tx_base64"])
    assert bytes(ix.data[:8]) == SELL_V2_DISCRIMINATOR and len(ix.accounts) == 26
    sold = sell_quote(bought.after, held, rates)
    assert sell["sol_out_lamports"] == sold.sol_out
    fee_accounts = await missing(node_url, ix.accounts[7].pubkey, ix.accounts[17].pubkey)
    sol_before = await lamports(node_url, user)
    fee = await land(trader, node_url, sell)
    received = await lamports(node_url, user) - sol_before + fee + fee_accounts * TOKEN_ACCOUNT_RENT
    assert received == sell["sol_out_lamports"] >= sell["min_sol_output_lamports"] > 0
    assert await token_amount(node_url, user, coin.mint, TOKEN_2022_PROGRAM_ID) == 0
    left = pooled + bought.sol_amount - sold.sol_amount
    assert await token_amount(node_url, coin.address, WSOL_MINT, TOKEN_PROGRAM_ID) == left


@pytest.mark.parametrize(
    ("kind", "instruction", "discriminator"),
    [
        ("sol", "buy_exact_sol_in", BUY_EXACT_SOL_IN_DISCRIMINATOR),
        ("wsol", "buy_exact_quote_in_v2", BUY_EXACT_QUOTE_IN_V2_DISCRIMINATOR),
    ],
)
async def test_an_exact_in_snipe_spends_the_budget(
    trader: Trader, node_url: str, kind: str, instruction: str, discriminator: bytes
) -> None:
    coin = await quiet_coin(node_url, wsol_curve if kind == "wsol" else sol_coin, f"quiet {kind} curve")
    user = trader.keypair.pubkey()
    global_, before = await pump_global(node_url), await curve_of(node_url, coin.mint)
    budget = 123_456_789

    snipe = await build(trader, "executeSnipe", {"mint": str(coin.mint), "amount_sol": "0.123456789", "exact_in": True})
    assert snipe["instruction"] == instruction
    ix = pump_ix(snipe["unsigned_tx_base64"])
    assert bytes(ix.data[:8]) == discriminator
    quote = exact_in_quote(before.reserves, budget, fee_rates(global_, before))
    assert snipe["tokens_out"] == quote.token_amount
    assert snipe["min_tokens_out"] == -(-quote.token_amount * 9_500 // 10_000)  # the default 5% off the tokens
    assert snipe["max_sol_cost_lamports"] == budget
    fee_accounts = await missing(node_url, ix.accounts[7].pubkey, ix.accounts[17].pubkey) if kind == "wsol" else 0
    sol_before = await lamports(node_url, user)

    fee = await land(trader, node_url, snipe)
    assert await token_amount(node_url, user, coin.mint, coin.token_program) == quote.token_amount
    assert (await curve_of(node_url, coin.mint)).reserves == quote.after
    account_rent = spl.rent_exempt_minimum(
        spl.TOKEN_2022_ACCOUNT_SIZE if coin.token_program == TOKEN_2022_PROGRAM_ID else spl.TOKEN_ACCOUNT_SIZE
    )
    spent = sol_before - await lamports(node_url, user) - fee - account_rent - fee_accounts * TOKEN_ACCOUNT_RENT
    assert spent == snipe["sol_cost_lamports"] == quote.total_cost
    assert budget - 1 <= spent <= budget  # the whole budget (one lamport may stay: the program's fee rounding)


async def test_a_sol_coin_still_trades_through_the_legacy_buy(trader: Trader, node_url: str) -> None:
    coin = await quiet_coin(node_url, sol_coin, "quiet SOL coin")
    snipe = await build(trader, "executeSnipe", {"mint": str(coin.mint), "amount_sol": "0.05"})
    assert (snipe["instruction"], snipe["quote"], snipe["compute_unit_limit"]) == ("buy", "SOL", 150_000)
    ix = pump_ix(snipe["unsigned_tx_base64"])
    assert bytes(ix.data[:8]) == BUY_DISCRIMINATOR and len(ix.accounts) == 18
    await land(trader, node_url, snipe)
    assert await token_amount(node_url, trader.keypair.pubkey(), coin.mint, TOKEN_PROGRAM_ID) == snipe["tokens_out"]
