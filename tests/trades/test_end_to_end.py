"""A snipe and a sell, built by the gateway, signed by a funded test wallet with solders, sent through the
gateway with solana-py's AsyncClient, and landed on the devnode (which executes pump buys and sells
itself: devnode/pump_exec). The wallet then holds exactly ``tokens_out``, the curve moved exactly as the
curve math says, the sale pays at least ``min_sol_output_lamports``, and a buy whose price moved past its
slippage fails on chain and changes nothing but its fee."""

from __future__ import annotations

from typing import Any

import aiohttp
import asyncpg
import pytest
from solana.rpc.async_api import AsyncClient
from solana.rpc.commitment import Confirmed
from solana.rpc.models import TxOpts
from solders.pubkey import Pubkey
from solders.signature import Signature
from solders.transaction_status import TransactionErrorInstructionError

from gateway_client import solana_client
from pumpfun.curve import buy_quote, sell_quote
from pumpfun.errors import PumpError
from pumpfun.fees import fee_rates
from pumpfun.ids import TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID
from tests.chain import wait_confirmed, wait_landed
from tests.support import RunningGateway
from tests.trades.coins import Coin, curve_of, pump_global, token_amount
from tests.trades.conftest import Trader, new_trader, quiet_coin
from tests.trades.decode import signed_by

pytestmark = pytest.mark.integration


def live(program: Pubkey) -> Any:
    def wanted(c: Coin) -> bool:
        return c.live and c.sol_quoted and c.token_program == program and c.curve.real_token_reserves > 10**14

    return wanted


async def build(trader: Trader, method: str, fields: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = await trader.caller.result(method, [fields])
    return result


async def send(trader: Trader, unsigned_tx: str, *, skip_preflight: bool = False) -> Signature:
    """Sign the built transaction with the wallet's key and send it through the gateway (solana-py)."""
    tx = signed_by(unsigned_tx, trader.keypair)
    key = trader.caller.headers["X-Api-Key"]
    async with solana_client(trader.caller.url, api_key=key) as client:
        opts = TxOpts(skip_preflight=skip_preflight, preflight_commitment=Confirmed)
        return (await client.send_raw_transaction(bytes(tx), opts)).value


async def lamports(node_url: str, who: Pubkey) -> int:
    async with AsyncClient(node_url) as node:
        return (await node.get_balance(who, Confirmed)).value


async def fee_of(node_url: str, signature: Signature) -> int:
    async with AsyncClient(node_url) as node:
        found = await node.get_transaction(signature, "json", Confirmed, max_supported_transaction_version=0)
    assert found.value is not None and found.value.transaction.meta is not None
    return found.value.transaction.meta.fee


@pytest.mark.parametrize("program", [TOKEN_PROGRAM_ID, TOKEN_2022_PROGRAM_ID], ids=["classic", "v2"])
async def test_a_snipe_lands_with_tokens_out_and_the_sell_pays_at_least_its_minimum(
    trader: Trader, node_url: str, program: Pubkey
) -> None:
    coin = await quiet_coin(node_url, live(program), "quiet live curve")
    user = trader.keypair.pubkey()
    global_, before = await pump_global(node_url), await curve_of(node_url, coin.mint)
    snipe = await build(trader, "executeSnipe", {"mint": str(coin.mint), "amount_sol": "0.25"})

    signature = await send(trader, snipe["unsigned_tx_base64"])
    async with AsyncClient(node_url) as node:
        await wait_confirmed(node, signature)
    held = await token_amount(node_url, user, coin.mint, program)
    assert held == snipe["tokens_out"] > 0
    rates = fee_rates(global_, before)
    bought = buy_quote(before.reserves, held, rates)
    assert (await curve_of(node_url, coin.mint)).reserves == bought.after  # the curve math, to the unit
    assert bought.total_cost == snipe["sol_cost_lamports"] <= 250_000_000

    more = await trader.caller.rpc("executeSell", [{"mint": str(coin.mint), "token_amount": held + 1}])
    assert f"holds {held} raw units" in more[1]["error"]["message"], more
    dust = await trader.caller.rpc("executeSell", [{"mint": str(coin.mint), "token_amount": 1}])
    assert "must gross at least" in dust[1]["error"]["message"], dust

    sell = await build(trader, "executeSell", {"mint": str(coin.mint), "token_amount": str(held)})
    assert sell["sol_out_lamports"] == sell_quote(bought.after, held, rates).sol_out
    sol_before = await lamports(node_url, user)
    signature = await send(trader, sell["unsigned_tx_base64"])
    async with AsyncClient(node_url) as node:
        await wait_confirmed(node, signature)
    received = await lamports(node_url, user) - sol_before + await fee_of(node_url, signature)
    assert received == sell["sol_out_lamports"] >= sell["min_sol_output_lamports"] > 0
    assert await token_amount(node_url, user, coin.mint, program) == 0


async def test_a_buy_past_its_slippage_fails_on_chain_and_changes_nothing(
    trader: Trader,
    http: aiohttp.ClientSession,
    trade_gateway: RunningGateway,
    node_url: str,
    db: asyncpg.Connection,
) -> None:
    coin = await quiet_coin(node_url, live(TOKEN_PROGRAM_ID), "quiet live curve")
    user = trader.keypair.pubkey()
    tight = await build(trader, "executeSnipe", {"mint": str(coin.mint), "amount_sol": 0.1, "slippage_bps": 0})

    other = await new_trader(http, trade_gateway.url, node_url, db)  # moves the price first
    first = await build(other, "executeSnipe", {"mint": str(coin.mint), "amount_sol": 1})
    async with AsyncClient(node_url) as node:
        await wait_confirmed(node, await send(other, first["unsigned_tx_base64"]))
    moved = await curve_of(node_url, coin.mint)
    sol_before = await lamports(node_url, user)

    signature = await send(trader, tight["unsigned_tx_base64"], skip_preflight=True)
    async with AsyncClient(node_url) as node:
        status = await wait_landed(node, signature)
    assert isinstance(status.err, TransactionErrorInstructionError), status.err
    assert "Custom" in str(status.err.err) and str(int(PumpError.TooMuchSolRequired)) in str(status.err.err)
    assert await token_amount(node_url, user, coin.mint, TOKEN_PROGRAM_ID) == 0  # not even the token account
    assert await curve_of(node_url, coin.mint) == moved
    assert await lamports(node_url, user) == sol_before - await fee_of(node_url, signature)  # only the fee
