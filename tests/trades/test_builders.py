"""executeSnipe and executeSell through a real gateway in front of a devnode whose launch feed made the
curves: every refusal is free and names its cause, a build costs exactly its ``fee_credits`` (in the
header and in the ledger), the transaction is exactly what the pumpfun encoders and the curve math give,
and a build that fails after billing is refunded as a ledger entry."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest
from solders.compute_budget import set_compute_unit_limit, set_compute_unit_price
from solders.pubkey import Pubkey

from devnode.sol_usd_pool import SOL_USD_POOL
from gateway.mcp.tools import BY_NAME
from gateway.trades.rules import SNIPE_COMPUTE_UNITS, graduated_pool
from pumpfun.curve import buy_quote, max_tokens_for_sol
from pumpfun.fees import buyback_fee_recipients, fee_rates, fee_recipients
from pumpfun.ids import TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID, USDC_MINT
from pumpfun.instructions import BuyArgs, associated_token_account_instruction, buy_instruction
from tests.mcp.test_mcp import mcp_session, text_of
from tests.sending.conftest import FailingRelay, charged, sending_settings
from tests.support import RunningGateway, serve_gateway
from tests.trades.coins import Coin, curve_of, pump_global
from tests.trades.conftest import Trader, new_trader, quiet_coin, wait_for_coin
from tests.trades.decode import BUY_BUYBACK_AT, FEE_RECIPIENT_AT, assert_same, instructions_of, signed_by, unsigned

pytestmark = pytest.mark.integration

RATE_MICRO_USD = 150_000_000
NOTIONAL_BPS = 10
CREDITS_PER_USDC = 100_000
BUILD_FEE = 50


def expected_fee(notional_lamports: int) -> int:
    share = notional_lamports * NOTIONAL_BPS * RATE_MICRO_USD * CREDITS_PER_USDC
    return BUILD_FEE + -(-share // (10_000 * 10**9 * 10**6))


def live(c: Coin) -> bool:
    return c.live and c.sol_quoted and c.curve.real_token_reserves > 10**14


async def debited(db: asyncpg.Connection, pubkey: str, method: str, timeout_s: float = 10.0) -> tuple[int, int]:
    """(credits debited, credits refunded) for ``method`` in the account's ledger, once the flush wrote them."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        rows = await db.fetch(
            "SELECT type, amount, description FROM ledger_entries WHERE pubkey = $1 AND type IN ('debit', 'refund')",
            pubkey,
        )
        debit = -sum(r["amount"] for r in rows if r["type"] == "debit" and method in r["description"])
        refund = sum(r["amount"] for r in rows if r["type"] == "refund" and method in r["description"])
        if debit or asyncio.get_running_loop().time() > deadline:
            return debit, refund
        await asyncio.sleep(0.2)


async def balance(db: asyncpg.Connection, pubkey: str) -> int:
    return int(await db.fetchval("SELECT balance FROM accounts WHERE pubkey = $1", pubkey))


# -- refusals --------------------------------------------------------------------------------------------


async def _graduated(url: str) -> str:
    return str((await wait_for_coin(url, lambda c: c.curve.complete, "graduated curve")).mint)


async def _usdc(url: str) -> str:
    return str((await wait_for_coin(url, lambda c: c.usdc_quoted, "USDC-quoted curve")).mint)


async def _live(url: str) -> str:
    return str((await wait_for_coin(url, live, "live SOL curve")).mint)


async def _fixed(mint: str) -> str:
    return mint


Mint = Callable[[str], Any]
REFUSALS: list[tuple[str, str, Mint, dict[str, Any], str]] = [
    ("bad-mint", "executeSnipe", lambda url: _fixed("not-a-mint"), {"amount_sol": 0.1}, "mint must be a base58"),
    (
        "unknown-mint",
        "executeSnipe",
        lambda url: _fixed(str(Pubkey.new_unique())),
        {"amount_sol": 0.1},
        "does not exist",
    ),
    (
        "unknown-curve",
        "executeSnipe",
        lambda url: _fixed(str(USDC_MINT)),
        {"amount_sol": 0.1},
        "no pump.fun bonding curve",
    ),
    ("graduated", "executeSnipe", _graduated, {"amount_sol": 0.1}, "graduated and now trades on PumpSwap"),
    ("graduated-sell", "executeSell", _graduated, {"token_amount": 10**9}, "graduated and now trades on PumpSwap"),
    ("non-sol-quote", "executeSnipe", _usdc, {"amount_sol": 0.1}, "quoted in USDC"),
    ("all", "executeSell", _live, {"token_amount": "all"}, "'all' is not accepted"),
    ("fraction", "executeSell", _live, {"token_amount": "1.5"}, "is a fraction"),
    ("zero", "executeSell", _live, {"token_amount": 0}, "got 0"),
    ("negative", "executeSell", _live, {"token_amount": -10}, "negative"),
    ("more-than-held", "executeSell", _live, {"token_amount": 10**9}, "holds 0 raw units"),
    ("dust", "executeSell", _live, {"token_amount": 1}, "must gross at least 3 lamports"),
    ("bad-amount", "executeSnipe", _live, {"amount_sol": "0.0000000001"}, "more than 9 decimals"),
    ("too-small", "executeSnipe", _live, {"amount_sol": "0.000000001"}, "buys no token"),
    ("bad-slippage", "executeSnipe", _live, {"amount_sol": 0.1, "slippage_bps": 20_000}, "slippage_bps"),
]


@pytest.mark.parametrize(
    ("method", "mint_of", "fields", "cause"), [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS]
)
async def test_each_refusal_is_free_and_names_its_cause(
    trader: Trader, node_url: str, method: str, mint_of: Mint, fields: dict[str, Any], cause: str
) -> None:
    mint = await mint_of(node_url)
    doc, cost = await charged(trader.caller, method, [{"mint": mint, **fields}])
    assert "result" not in doc and doc["error"]["code"] == -32602, doc
    assert cause in doc["error"]["message"], doc
    assert cost == 0
    if "graduated" in cause:
        pool = str(graduated_pool(Pubkey.from_string(mint)))
        assert pool in doc["error"]["message"] and doc["error"]["data"]["pool"] == pool


# -- a build -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("program", [TOKEN_PROGRAM_ID, TOKEN_2022_PROGRAM_ID], ids=["classic", "v2"])
async def test_a_snipe_costs_its_fee_credits_and_is_the_exact_buy(
    trader: Trader, node_url: str, db: asyncpg.Connection, program: Pubkey
) -> None:
    coin = await quiet_coin(node_url, lambda c: live(c) and c.token_program == program, "live curve")
    global_, curve = await pump_global(node_url), await curve_of(node_url, coin.mint)
    params = {"mint": str(coin.mint), "amount_sol": 0.05, "slippage_bps": 300, "priority_fee_micro_lamports": 12_345}
    before = await balance(db, trader.pubkey)

    doc, cost = await charged(trader.caller, "executeSnipe", [params])
    result = doc["result"]
    assert result["fee_credits"] == cost == expected_fee(50_000_000) == 800  # 50 + 0.05 SOL x $150 x 0.1%
    assert result["mint"] == str(coin.mint) and result["bonding_curve"] == str(coin.address)
    assert result["token_program"] == str(program) and result["quote"] == "SOL"

    rates = fee_rates(global_, curve)  # the Global's basis points, read from the chain
    tokens = max_tokens_for_sol(curve.reserves, 50_000_000, rates)
    cost_lamports = buy_quote(curve.reserves, tokens, rates).total_cost
    assert result["tokens_out"] == tokens and result["sol_cost_lamports"] == cost_lamports <= 50_000_000
    assert result["max_sol_cost_lamports"] == cost_lamports + cost_lamports * 300 // 10_000

    tx = unsigned(result["unsigned_tx_base64"])
    user = trader.keypair.pubkey()
    assert tx.message.account_keys[0] == user
    got = instructions_of(tx)
    fee_recipient, buyback = got[-1].accounts[FEE_RECIPIENT_AT].pubkey, got[-1].accounts[BUY_BUYBACK_AT].pubkey
    assert fee_recipient in fee_recipients(global_, curve) and buyback in buyback_fee_recipients(global_)
    args = BuyArgs(tokens, result["max_sol_cost_lamports"], True)
    assert_same(
        got,
        [
            set_compute_unit_limit(SNIPE_COMPUTE_UNITS),
            set_compute_unit_price(12_345),
            associated_token_account_instruction(user, user, coin.mint, program),
            buy_instruction(coin.mint, user, curve.creator, fee_recipient, buyback, args, program),
        ],
    )
    signed_by(result["unsigned_tx_base64"], trader.keypair)  # the caller's key signs it as it is

    assert await debited(db, trader.pubkey, "executeSnipe") == (800, 0)  # one debit entry, at the flush
    assert await balance(db, trader.pubkey) == before - 800 - 1  # and the getSlot that read the header before


async def test_a_failure_after_billing_is_refunded_as_a_ledger_entry(
    node_url: str, tmp_path: Path, database_url: str, redis_url: str, db: asyncpg.Connection
) -> None:
    relay = FailingRelay(node_url)
    await relay.start()
    try:
        settings = sending_settings(tmp_path, database_url, redis_url, f"http://127.0.0.1:{relay.port}/")
        async with serve_gateway(settings) as gw, aiohttp.ClientSession() as http:
            trader = await new_trader(http, gw.url, node_url, db)
            mint = str((await wait_for_coin(node_url, live, "live SOL curve")).mint)
            relay.fail_on = b"getLatestBlockhash"  # the curve reads before billing pass; the build's do not
            doc, cost = await charged(trader.caller, "executeSnipe", [{"mint": mint, "amount_sol": 0.2}])
    finally:
        await relay.stop()
    assert doc["error"]["code"] == -32003 and "the build fee was refunded" in doc["error"]["message"], doc
    assert "Node is behind" in doc["error"]["message"] and cost == 0
    fee = expected_fee(200_000_000)
    assert await debited(db, trader.pubkey, "executeSnipe") == (fee, fee)  # charged, then a refund entry


async def test_short_of_credits_is_402_and_charges_nothing(
    http: aiohttp.ClientSession, trade_gateway: RunningGateway, node_url: str, db: asyncpg.Connection
) -> None:
    poor = await new_trader(http, trade_gateway.url, node_url, db, usdc=10_000)  # 1,000 credits
    mint = str((await wait_for_coin(node_url, live, "live SOL curve")).mint)
    _, _, before = await poor.caller.rpc("getSlot", [])
    status, doc, after = await poor.caller.rpc("executeSnipe", [{"mint": mint, "amount_sol": 1}])  # 15,050 credits
    assert status == 402 and doc["error"]["code"] == -32010, doc
    assert after == before
    cheap = [{"mint": mint, "amount_sol": 0.001}]  # 50 + 15 credits: affordable
    status, doc, after = await poor.caller.rpc("executeSnipe", cheap)
    assert status == 200 and doc["result"]["fee_credits"] == 65 == before - after, doc


async def test_in_a_batch_each_build_is_billed_on_its_own(trader: Trader, node_url: str) -> None:
    mint = str((await wait_for_coin(node_url, live, "live SOL curve")).mint)
    body = [
        {"jsonrpc": "2.0", "id": "a", "method": "executeSnipe", "params": [{"mint": mint, "amount_sol": 0.01}]},
        {"jsonrpc": "2.0", "id": "b", "method": "executeSell", "params": [{"mint": mint, "token_amount": "all"}]},
        {"jsonrpc": "2.0", "id": "c", "method": "executeSnipe", "params": [{"mint": mint, "amount_sol": "0.02"}]},
    ]
    _, _, before = await trader.caller.rpc("getSlot", [])
    async with trader.caller.http.post(trader.caller.url, json=body, headers=trader.caller.headers) as resp:
        answers = {a["id"]: a for a in await resp.json()}
        after = int(resp.headers["X-Credits-Remaining"])
    assert answers["b"]["error"]["code"] == -32602
    fees = answers["a"]["result"]["fee_credits"], answers["c"]["result"]["fee_credits"]
    assert fees == (expected_fee(10_000_000), expected_fee(20_000_000)) and before - after == sum(fees)


async def test_pricing_publishes_the_fee_the_share_and_the_pools_rate(trade_gateway: RunningGateway) -> None:
    async with aiohttp.ClientSession() as http, http.get(trade_gateway.url + "/pricing") as resp:
        doc = await resp.json()
    assert doc["classes"]["TRADE_BUILD"] == {
        "credits": BUILD_FEE,
        "methods": ["executeSell", "executeSnipe"],
        "not_available": [],
    }
    trade = doc["trade_builders"]
    assert (trade["build_fee_credits"], trade["notional_fee_bps"], trade["sol_usd_micro"]) == (
        BUILD_FEE,
        NOTIONAL_BPS,
        RATE_MICRO_USD,
    )
    # the devnode's SOL/USDC pool is priced at $150.00, the configured rate too (tests/trades/test_sol_usd.py)
    assert trade["rate_source"] == f"pool:{SOL_USD_POOL}" and trade["credits_per_usdc"] == doc["credits_per_usdc"]


async def test_the_mcp_tools_build_the_same(trade_gateway: RunningGateway, trader: Trader, node_url: str) -> None:
    assert BY_NAME["executeSnipe"].request({"mint": "m", "amount_sol": 0.5}) == (
        "executeSnipe",
        [{"mint": "m", "amount_sol": 0.5}],
    )
    mint = str((await wait_for_coin(node_url, live, "live SOL curve")).mint)
    async with mcp_session(trade_gateway.url, trader.caller.headers["X-Api-Key"]) as session:
        built = await session.call_tool("executeSnipe", {"mint": mint, "amount_sol": 0.01, "slippage_bps": 100})
        refused = await session.call_tool("executeSell", {"mint": mint, "token_amount": "all"})
    result = json.loads(text_of(built))
    assert not built.is_error and result["fee_credits"] == expected_fee(10_000_000) and result["tokens_out"] > 0
    assert refused.is_error and "'all' is not accepted" in text_of(refused)
