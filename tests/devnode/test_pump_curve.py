"""Curve math against cases worked out by hand from the reference formulas on the initial curve
(vTok 1,073,000,000,000,000; vSol 30,000,000,000; realTok 793,100,000,000,000; realSol 0), at the current
bonding-curve tier (protocol 95 bps + creator 30 bps, the rates of the devnode's Global account)."""

from __future__ import annotations

from pumpfun.curve import (
    CurveReserves,
    FeeRates,
    buy_quote,
    buy_sol_cost,
    buy_tokens_out,
    fee,
    market_cap_lamports,
    sell_quote,
    sell_sol_out,
)

INITIAL = CurveReserves(1_073_000_000_000_000, 30_000_000_000, 793_100_000_000_000, 0)
RATES = FeeRates(protocol_bps=95, creator_bps=30)


def test_fee_rounds_up() -> None:
    assert fee(0, 95) == 0
    assert fee(1, 95) == 1  # ceil(0.0095)
    assert fee(10_000, 95) == 95
    assert fee(10_001, 95) == 96  # ceil(95.0095)
    assert fee(27_985_075, 30) == 83_956  # ceil(83,955.225)


def test_buy_tokens_for_one_sol() -> None:
    # input = 1e9 * 10_000 // 10_125 = 987,654,320
    # tokens = 987,654,320 * 1,073e12 // (30e9 + 987,654,320) = 34,199,203,154,141
    assert buy_tokens_out(INITIAL, 1_000_000_000, RATES) == 34_199_203_154_141


def test_buy_cost_of_one_million_tokens() -> None:
    # base = 1e12 * 30e9 // (1,073e12 - 1e12) + 1 = 27,985,074 + 1
    # protocol = ceil(27,985,075 * 0.0095) = 265,859; creator = ceil(27,985,075 * 0.003) = 83,956
    q = buy_quote(INITIAL, 1_000_000_000_000, RATES)
    assert (q.sol_amount, q.protocol_fee, q.creator_fee) == (27_985_075, 265_859, 83_956)
    assert q.total_cost == buy_sol_cost(INITIAL, 1_000_000_000_000, RATES) == 28_334_890
    assert q.after == CurveReserves(1_072_000_000_000_000, 30_027_985_075, 792_100_000_000_000, 27_985_075)


def test_sell_of_one_million_tokens() -> None:
    # base = 1e12 * 30e9 // (1,073e12 + 1e12) = 27,932,960
    # protocol = ceil(265,363.12) = 265,364; creator = ceil(83,798.88) = 83,799
    q = sell_quote(INITIAL, 1_000_000_000_000, RATES)
    assert (q.sol_amount, q.protocol_fee, q.creator_fee) == (27_932_960, 265_364, 83_799)
    assert q.sol_out == sell_sol_out(INITIAL, 1_000_000_000_000, RATES) == 27_583_797


def test_buying_every_real_token_costs_about_86_sol_and_empties_the_curve() -> None:
    # base = 793.1e12 * 30e9 // (1,073e12 - 793.1e12) + 1 = 85,005,359,057
    q = buy_quote(INITIAL, 10**18, RATES)  # more than the curve holds: capped at the real reserves
    assert q.token_amount == 793_100_000_000_000
    assert q.sol_amount == 85_005_359_057
    assert (q.protocol_fee, q.creator_fee) == (807_550_912, 255_016_078)
    assert q.total_cost == 86_067_926_047
    assert q.after.real_token_reserves == 0
    assert q.after.virtual_token_reserves == 279_900_000_000_000


def test_tokens_out_never_exceed_the_real_reserves() -> None:
    assert buy_tokens_out(INITIAL, 10**15, RATES) == INITIAL.real_token_reserves
    assert buy_tokens_out(INITIAL, 0, RATES) == 0


def test_a_buy_then_a_sell_of_the_same_tokens_leaves_the_curve_no_poorer() -> None:
    bought = buy_quote(INITIAL, 5_000_000_000_000, RATES)
    sold = sell_quote(bought.after, 5_000_000_000_000, RATES)
    assert sold.after.virtual_token_reserves == INITIAL.virtual_token_reserves
    assert sold.after.real_sol_reserves >= 0
    assert sold.sol_amount <= bought.sol_amount


def test_market_cap_of_the_initial_curve() -> None:
    assert market_cap_lamports(INITIAL, 1_000_000_000_000_000) == 27_958_993_476  # about 28 SOL
