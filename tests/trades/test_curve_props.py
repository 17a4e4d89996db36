"""Properties of the curve math the builders quote with (pumpfun.curve, through gateway.trades.rules), over
any curve state and fee rates: a buy then a sell of everything never returns more SOL than was paid, a
fee never rounds in the trader's favour, and the slippage bounds only ever protect the trader."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from solders.pubkey import Pubkey

from gateway.trades.params import SellParams, SnipeParams
from gateway.trades.rules import Market, SellPlan, SnipePlan, min_sale_lamports, plan_sell, plan_snipe
from pumpfun import pda
from pumpfun.accounts import INITIAL_REAL_TOKEN_RESERVES, BondingCurve, Global
from pumpfun.curve import CurveReserves, FeeRates, buy_quote, max_tokens_for_sol, sell_quote
from pumpfun.ids import TOKEN_PROGRAM_ID

MINT = Pubkey.new_unique()
CREATOR = Pubkey.new_unique()


@st.composite
def curves(draw: st.DrawFn) -> CurveReserves:
    """A curve as trading leaves it (a fresh one after any buy), or any consistent reserves."""
    if draw(st.booleans()):
        fresh = BondingCurve.new(CREATOR).reserves
        bought = draw(st.integers(0, INITIAL_REAL_TOKEN_RESERVES - 1))
        return buy_quote(fresh, bought, FeeRates(0, 0)).after
    virtual_tokens = draw(st.integers(10**6, 10**16))
    virtual_sol = draw(st.integers(10**6, 10**13))
    real_tokens = draw(st.integers(0, virtual_tokens - 1))
    return CurveReserves(virtual_tokens, virtual_sol, real_tokens, draw(st.integers(0, virtual_sol)))


rates = st.builds(FeeRates, st.integers(0, 1_000), st.integers(0, 1_000))
budgets = st.integers(1, 200 * 10**9)


def _market(reserves: CurveReserves, fee_rates: FeeRates) -> Market:
    curve = BondingCurve(
        reserves.virtual_token_reserves,
        reserves.virtual_sol_reserves,
        reserves.real_token_reserves,
        reserves.real_sol_reserves,
        10**15,
        False,
        CREATOR,
    )
    global_ = Global(fee_basis_points=fee_rates.protocol_bps, creator_fee_basis_points=fee_rates.creator_bps)
    return Market(MINT, TOKEN_PROGRAM_ID, pda.bonding_curve_pda(MINT), curve, global_)


@settings(max_examples=400, deadline=None)
@given(curve=curves(), fee_rates=rates, budget=budgets)
def test_a_buy_then_a_sell_of_everything_never_returns_more_than_was_paid(
    curve: CurveReserves, fee_rates: FeeRates, budget: int
) -> None:
    tokens = max_tokens_for_sol(curve, budget, fee_rates)
    bought = buy_quote(curve, tokens, fee_rates)
    assert bought.total_cost <= budget
    sold = sell_quote(bought.after, tokens, fee_rates)
    assert sold.sol_out <= bought.total_cost
    assert sold.sol_amount <= bought.sol_amount  # the curve itself never pays back more than it took
    if tokens < curve.real_token_reserves:  # the most the budget buys: one more token costs more
        assert buy_quote(curve, tokens + 1, fee_rates).total_cost > budget


@settings(max_examples=400, deadline=None)
@given(curve=curves(), fee_rates=rates, tokens=st.integers(1, 10**15))
def test_fees_never_round_in_the_traders_favour(curve: CurveReserves, fee_rates: FeeRates, tokens: int) -> None:
    bought = buy_quote(curve, tokens, fee_rates)
    sold = sell_quote(curve, tokens, fee_rates)
    for quote in (bought, sold):
        assert quote.protocol_fee * 10_000 >= quote.sol_amount * fee_rates.protocol_bps
        assert quote.creator_fee * 10_000 >= quote.sol_amount * fee_rates.creator_bps
    assert bought.total_cost * 10_000 >= bought.sol_amount * (10_000 + fee_rates.total_bps)
    assert sold.sol_out * 10_000 <= sold.sol_amount * (10_000 - fee_rates.total_bps)
    if bought.token_amount:  # the curve takes at least the exact price (the SDK's + 1)
        exact = bought.token_amount * curve.virtual_sol_reserves
        assert bought.sol_amount * (curve.virtual_token_reserves - bought.token_amount) > exact


@settings(max_examples=300, deadline=None)
@given(curve=curves(), fee_rates=rates, budget=budgets, slippage=st.integers(0, 10_000))
def test_the_builders_bounds_protect_the_trader(
    curve: CurveReserves, fee_rates: FeeRates, budget: int, slippage: int
) -> None:
    market = _market(curve, fee_rates)
    snipe = plan_snipe(SnipeParams(MINT, budget, slippage, 0), market)
    if not isinstance(snipe, SnipePlan):
        assert max_tokens_for_sol(curve, budget, fee_rates) == 0
        return
    cost = snipe.quote.total_cost
    assert snipe.tokens_out == max_tokens_for_sol(curve, budget, fee_rates) and cost <= budget
    assert cost <= snipe.max_sol_cost and snipe.max_sol_cost * 10_000 <= cost * (10_000 + slippage)

    after = _market(snipe.quote.after, fee_rates)
    sell = plan_sell(SellParams(MINT, snipe.tokens_out, slippage, 0), after, held=snipe.tokens_out)
    if not isinstance(sell, SellPlan):
        assert "gross at least" in sell.message or "pays nothing" in sell.message, sell
        return
    out = sell.quote.sol_out
    assert 0 < out <= cost and sell.min_sol_output <= out
    assert sell.min_sol_output * 10_000 >= out * (10_000 - slippage)


@given(fee_rates=rates)
def test_the_dust_threshold_is_the_smallest_sale_that_pays(fee_rates: FeeRates) -> None:
    threshold = min_sale_lamports(fee_rates)
    assert threshold is not None

    def net(gross: int) -> int:
        return gross - -(-gross * fee_rates.protocol_bps // 10_000) - -(-gross * fee_rates.creator_bps // 10_000)

    assert net(threshold) >= 1 and all(net(g) <= 0 for g in range(1, threshold))
