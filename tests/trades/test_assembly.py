"""From accounts to a refusal or an unsigned transaction (gateway.trades.rules), on made-up curves: the
shapes every kind of curve gets (classic SPL Token, v2 Token-2022, mayhem mode, wrapped SOL), and the
refusals that name their cause."""

from __future__ import annotations

import base64
import random

import pytest
from solders.compute_budget import set_compute_unit_limit, set_compute_unit_price
from solders.hash import Hash
from solders.keypair import Keypair
from solders.pubkey import Pubkey

from gateway.core.errors import RpcError
from gateway.trades.params import SellParams, SnipeParams
from gateway.trades.rules import (
    SELL_V2_COMPUTE_UNITS,
    SNIPE_COMPUTE_UNITS,
    SNIPE_V2_COMPUTE_UNITS,
    AccountData,
    Market,
    SellPlan,
    SnipePlan,
    account_data,
    graduated_pool,
    market,
    plan_sell,
    plan_snipe,
    sell_instructions,
    snipe_instructions,
    unsigned_v0,
)
from pumpfun import pda, wsol
from pumpfun.accounts import BondingCurve, Global, encode_bonding_curve, encode_global
from pumpfun.curve import buy_quote, max_tokens_for_sol, sell_quote
from pumpfun.fees import fee_rates
from pumpfun.ids import (
    ASSOCIATED_TOKEN_PROGRAM_ID,
    BUYBACK_FEE_RECIPIENTS,
    FEE_RECIPIENTS,
    PUMP_PROGRAM_ID,
    RESERVED_FEE_RECIPIENTS,
    SYSTEM_PROGRAM_ID,
    TOKEN_2022_PROGRAM_ID,
    TOKEN_PROGRAM_ID,
    USDC_MINT,
    WSOL_MINT,
)
from pumpfun.instructions import (
    BuyArgs,
    associated_token_account_instruction,
    buy_instruction,
)
from pumpfun.instructions_v2 import BuyV2Args, SellV2Args, buy_v2_instruction, quote_side, sell_v2_instruction
from pumpfun.spl import TokenAccountState, pack_token_account
from tests.trades.decode import (
    BUY_BUYBACK_AT,
    FEE_RECIPIENT_AT,
    assert_same,
    instructions_of,
    unsigned,
)

MINT = Keypair.from_seed(bytes([7] * 32)).pubkey()
USER = Keypair.from_seed(bytes([8] * 32))
CREATOR = Keypair.from_seed(bytes([9] * 32)).pubkey()
GLOBAL = Global(fee_basis_points=95, creator_fee_basis_points=30)
BLOCKHASH = Hash.new_unique()


def accounts(
    curve: BondingCurve | None, program: Pubkey = TOKEN_PROGRAM_ID, global_: Global | None = GLOBAL
) -> tuple[AccountData, AccountData | None, AccountData | None]:
    mint = AccountData(program, bytes(82))
    curve_data = None if curve is None else AccountData(PUMP_PROGRAM_ID, encode_bonding_curve(curve))
    global_data = None if global_ is None else AccountData(PUMP_PROGRAM_ID, encode_global(global_))
    return mint, curve_data, global_data


def traded(curve: BondingCurve, program: Pubkey = TOKEN_PROGRAM_ID) -> Market:
    found = market(MINT, *accounts(curve, program))
    assert isinstance(found, Market), found
    return found


def snipe(mkt: Market, lamports: int = 100_000_000, slippage: int = 500) -> SnipePlan:
    plan = plan_snipe(SnipeParams(MINT, lamports, slippage, 7_000), mkt)
    assert isinstance(plan, SnipePlan), plan
    return plan


@pytest.mark.parametrize("program", [TOKEN_PROGRAM_ID, TOKEN_2022_PROGRAM_ID], ids=["classic", "v2"])
def test_a_snipe_is_budget_ata_and_the_buy(program: Pubkey) -> None:
    curve = BondingCurve.new(CREATOR)
    plan = snipe(traded(curve, program))
    rates = fee_rates(GLOBAL, curve)
    tokens = max_tokens_for_sol(curve.reserves, 100_000_000, rates)
    cost = buy_quote(curve.reserves, tokens, rates).total_cost
    assert (plan.tokens_out, plan.quote.total_cost, plan.max_sol_cost) == (tokens, cost, cost + cost * 500 // 10_000)

    tx = unsigned(unsigned_v0(USER.pubkey(), snipe_instructions(plan, USER.pubkey(), random.Random(1)), BLOCKHASH))
    assert tx.message.recent_blockhash == BLOCKHASH and tx.message.account_keys[0] == USER.pubkey()
    got = instructions_of(tx)
    fee_recipient, buyback = got[-1].accounts[FEE_RECIPIENT_AT].pubkey, got[-1].accounts[BUY_BUYBACK_AT].pubkey
    assert fee_recipient in FEE_RECIPIENTS and buyback in BUYBACK_FEE_RECIPIENTS
    assert_same(
        got,
        [
            set_compute_unit_limit(SNIPE_COMPUTE_UNITS),
            set_compute_unit_price(7_000),
            associated_token_account_instruction(USER.pubkey(), USER.pubkey(), MINT, program),
            buy_instruction(
                MINT, USER.pubkey(), CREATOR, fee_recipient, buyback, BuyArgs(tokens, plan.max_sol_cost, True), program
            ),
        ],
    )


def test_a_mayhem_mode_coin_pays_a_reserved_fee_recipient() -> None:
    curve = BondingCurve.new(CREATOR, is_mayhem_mode=True)
    plan = snipe(traded(curve, TOKEN_2022_PROGRAM_ID))
    for seed in range(8):
        buy = snipe_instructions(plan, USER.pubkey(), random.Random(seed))[-1]
        assert buy.accounts[FEE_RECIPIENT_AT].pubkey in RESERVED_FEE_RECIPIENTS


def test_a_wrapped_sol_curve_funds_syncs_and_closes_the_wsol_account() -> None:
    curve = BondingCurve.new(CREATOR, quote_mint=WSOL_MINT)
    mkt = traded(curve, TOKEN_2022_PROGRAM_ID)
    plan = snipe(mkt)
    user = USER.pubkey()
    got = snipe_instructions(plan, user, random.Random(2))
    account = pda.associated_token_address(user, WSOL_MINT, TOKEN_PROGRAM_ID)
    assert [ix.program_id for ix in got[2:]] == [
        ASSOCIATED_TOKEN_PROGRAM_ID,
        ASSOCIATED_TOKEN_PROGRAM_ID,
        SYSTEM_PROGRAM_ID,
        TOKEN_PROGRAM_ID,
        PUMP_PROGRAM_ID,
        TOKEN_PROGRAM_ID,
    ]
    assert got[3] == associated_token_account_instruction(user, user, WSOL_MINT, TOKEN_PROGRAM_ID)
    assert got[4] == wsol.system_transfer_instruction(user, account, plan.max_sol_cost)
    assert got[5] == wsol.sync_native_instruction(account) and bytes(got[5].data) == bytes([17])
    assert got[7] == wsol.close_account_instruction(account, user, user) and bytes(got[7].data) == bytes([9])
    fee_recipient, buyback = got[6].accounts[6].pubkey, got[6].accounts[8].pubkey  # buy_v2's positions
    assert got[0] == set_compute_unit_limit(SNIPE_V2_COMPUTE_UNITS)
    assert got[6] == buy_v2_instruction(
        MINT, user, CREATOR, fee_recipient, buyback, quote_side(WSOL_MINT), TOKEN_2022_PROGRAM_ID,
        BuyV2Args(plan.tokens_out, plan.max_sol_cost),
    )  # fmt: skip

    held = plan.tokens_out
    after = traded(curve.with_reserves(plan.quote.after), TOKEN_2022_PROGRAM_ID)
    sell = plan_sell(SellParams(MINT, held, 100, 0), after, held)
    assert isinstance(sell, SellPlan), sell
    ixs = sell_instructions(sell, user, random.Random(3))
    assert ixs[:2] == [set_compute_unit_limit(SELL_V2_COMPUTE_UNITS), set_compute_unit_price(0)]
    assert ixs[2] == associated_token_account_instruction(user, user, WSOL_MINT, TOKEN_PROGRAM_ID)
    fee_recipient, buyback = ixs[3].accounts[6].pubkey, ixs[3].accounts[8].pubkey  # sell_v2's positions
    expected = sell_v2_instruction(
        MINT, user, CREATOR, fee_recipient, buyback, quote_side(WSOL_MINT), TOKEN_2022_PROGRAM_ID,
        SellV2Args(held, sell.min_sol_output),
    )  # fmt: skip
    assert ixs[3] == expected and ixs[4] == wsol.unwrap_sol_instruction(user) and len(ixs) == 5
    assert fee_recipient in FEE_RECIPIENTS and buyback in BUYBACK_FEE_RECIPIENTS


def test_a_sell_quotes_net_of_fees_with_a_guarded_minimum() -> None:
    curve = BondingCurve.new(CREATOR)
    rates = fee_rates(GLOBAL, curve)
    bought = buy_quote(curve.reserves, 10**12, rates)
    mkt = traded(curve.with_reserves(bought.after))
    plan = plan_sell(SellParams(MINT, 10**12, 250, 0), mkt, held=10**12)
    assert isinstance(plan, SellPlan), plan
    quote = sell_quote(bought.after, 10**12, rates)
    assert plan.quote == quote and plan.notional_lamports == quote.sol_amount
    assert plan.min_sol_output == quote.sol_out - quote.sol_out * 250 // 10_000


def test_sell_refusals_name_holdings_and_the_dust_threshold() -> None:
    curve = BondingCurve.new(CREATOR)
    mkt = traded(curve.with_reserves(buy_quote(curve.reserves, 10**12, fee_rates(GLOBAL, curve)).after))
    short = plan_sell(SellParams(MINT, 10**9, 500, 0), mkt, held=10**6)
    assert isinstance(short, RpcError) and short.code == -32602
    assert "holds 1000000 raw units" in short.message and short.data == {"held": 10**6}
    dust = plan_sell(SellParams(MINT, 1, 500, 0), mkt, held=10**6)
    assert isinstance(dust, RpcError) and dust.code == -32602
    assert "at least 3 lamports" in dust.message and "95 + 30 bps" in dust.message, dust.message
    assert dust.data == {"min_gross_lamports": 3}
    need = int(dust.message.split("at least ")[2].split(" raw units")[0])  # the units the message names
    assert sell_quote(mkt.curve.reserves, need, mkt.rates).sol_out > 0
    assert sell_quote(mkt.curve.reserves, need - 1, mkt.rates).sol_out <= 0


def test_a_snipe_too_small_for_one_unit_is_refused() -> None:
    refused = plan_snipe(SnipeParams(MINT, 1, 500, 0), traded(BondingCurve.new(CREATOR)))
    assert isinstance(refused, RpcError) and refused.code == -32602 and "buys no token" in refused.message


def test_refusals_of_the_curve_name_their_cause() -> None:
    live = BondingCurve.new(CREATOR)
    complete = live.with_reserves(live.reserves, complete=True)
    graduated = market(MINT, *accounts(complete))
    assert isinstance(graduated, RpcError) and graduated.code == -32602
    assert "graduated" in graduated.message and str(graduated_pool(MINT)) in graduated.message
    assert graduated_pool(MINT) == pda.pool_pda(0, pda.pool_authority_pda(MINT), MINT, WSOL_MINT)

    usdc = market(MINT, *accounts(BondingCurve.new(CREATOR, quote_mint=USDC_MINT), TOKEN_2022_PROGRAM_ID))
    assert (
        isinstance(usdc, RpcError) and "quoted in USDC" in usdc.message and usdc.data == {"quote_mint": str(USDC_MINT)}
    )

    mint, _, global_ = accounts(live)
    no_curve = market(MINT, mint, None, global_)
    assert isinstance(no_curve, RpcError) and "has no pump.fun bonding curve" in no_curve.message
    no_mint = market(MINT, None, None, global_)
    assert isinstance(no_mint, RpcError) and "does not exist" in no_mint.message
    not_a_mint = market(MINT, AccountData(SYSTEM_PROGRAM_ID, b""), None, global_)
    assert isinstance(not_a_mint, RpcError) and "is not a token mint" in not_a_mint.message
    no_global = market(MINT, *accounts(live, global_=None))
    assert isinstance(no_global, RpcError) and no_global.code == -32003 and "Global" in no_global.message


def test_account_data_reads_the_nodes_base64_accounts() -> None:
    data = pack_token_account(TokenAccountState(MINT, USER.pubkey(), 42))
    value = {"data": [base64.b64encode(data).decode(), "base64"], "owner": str(TOKEN_PROGRAM_ID), "lamports": 1}
    assert account_data(value) == AccountData(TOKEN_PROGRAM_ID, data)
    assert account_data(None) is None
    with pytest.raises(ValueError):
        account_data({"data": "x"})
