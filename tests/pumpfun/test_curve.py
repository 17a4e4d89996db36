"""pumpfun.curve at explicit fee rates: `max_tokens_for_sol` as the exact inverse of the buy cost, the rates
reaching every quote, `BuyQuote.completes`, and the zero quotes of a migrated curve.

The hand-worked cases at the 95 + 30 bps tier are in tests/devnode/test_pump_curve.py.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pumpfun.curve import (
    BuyQuote,
    CurveReserves,
    FeeRates,
    buy_quote,
    buy_sol_cost,
    buy_tokens_out,
    fee,
    market_cap_lamports,
    max_tokens_for_sol,
    sell_quote,
    sell_sol_out,
)

INITIAL = CurveReserves(1_073_000_000_000_000, 30_000_000_000, 793_100_000_000_000, 0)
TIER = FeeRates(protocol_bps=95, creator_bps=30)
NO_FEES = FeeRates(protocol_bps=0, creator_bps=0)
MIGRATED = CurveReserves(0, 0, 0, 0)
SOL = 1_000_000_000


def _after_buying(n: int) -> CurveReserves:
    return buy_quote(INITIAL, n, TIER).after


rates = st.builds(FeeRates, st.integers(0, 1_000), st.integers(0, 1_000))
# Curves a trade can reach from the initial one, and arbitrary ones (realTok < vTok, as the program keeps them).
reachable = st.integers(0, INITIAL.real_token_reserves).map(_after_buying)
arbitrary = st.integers(1, 2**60).flatmap(
    lambda vtok: st.builds(
        CurveReserves,
        st.just(vtok),
        st.integers(1, 2**50),
        st.integers(0, vtok - 1),
        st.integers(0, 2**50),
    )
)
curves = reachable | arbitrary
budgets = st.integers(0, 200 * SOL) | st.integers(0, 10_000)


def assert_is_the_largest_affordable_amount(curve: CurveReserves, budget: int, r: FeeRates) -> int:
    n = max_tokens_for_sol(curve, budget, r)
    assert 0 <= n <= curve.real_token_reserves
    assert buy_sol_cost(curve, n, r) <= budget
    if n < curve.real_token_reserves:
        assert buy_sol_cost(curve, n + 1, r) > budget
    return n


# --- max_tokens_for_sol ---------------------------------------------------------------------------------


@settings(max_examples=600, deadline=None)
@given(curves, budgets, rates)
def test_max_tokens_for_sol_is_the_largest_amount_the_budget_pays_for(
    curve: CurveReserves, budget: int, r: FeeRates
) -> None:
    n = assert_is_the_largest_affordable_amount(curve, budget, r)
    q = buy_quote(curve, n, r)
    assert q.token_amount == n and q.total_cost <= budget


@settings(max_examples=300, deadline=None)
@given(curves, st.integers(1, 10**15), rates)
def test_the_exact_cost_of_an_amount_buys_at_least_that_amount_and_a_lamport_less_does_not(
    curve: CurveReserves, amount: int, r: FeeRates
) -> None:
    n = min(amount, curve.real_token_reserves)
    cost = buy_sol_cost(curve, n, r)
    assert max_tokens_for_sol(curve, cost, r) >= n
    if n > 0:
        assert max_tokens_for_sol(curve, cost - 1, r) < n


def test_a_sweep_of_budgets_on_the_initial_curve_and_a_half_sold_one() -> None:
    half_sold = _after_buying(INITIAL.real_token_reserves // 2)
    budgets = sorted({*range(0, 2_000, 7), *range(SOL - 50, SOL + 50), *(k * SOL // 3 for k in range(1, 601))})
    for curve in (INITIAL, half_sold):
        for r in (TIER, NO_FEES, FeeRates(100, 0), FeeRates(1, 9_999)):
            previous = 0
            for budget in budgets:
                n = assert_is_the_largest_affordable_amount(curve, budget, r)
                assert n >= previous  # a larger budget never buys less
                previous = n
            assert previous == curve.real_token_reserves  # 200 SOL buys out either curve, even at 100% fees


def test_max_tokens_for_sol_never_exceeds_the_sdk_estimate_which_can_overspend() -> None:
    """`buy_tokens_out` is the SDK's estimate; buying that many can cost a few lamports over the budget,
    `max_tokens_for_sol` never does."""
    overspent = 0
    for budget in range(SOL, SOL + 2_000):
        estimate = buy_tokens_out(INITIAL, budget, TIER)
        exact = max_tokens_for_sol(INITIAL, budget, TIER)
        assert exact <= estimate
        overspent += buy_sol_cost(INITIAL, estimate, TIER) > budget
    assert overspent  # the estimate is not an inverse; this is why max_tokens_for_sol exists


def test_max_tokens_for_sol_edges() -> None:
    assert max_tokens_for_sol(INITIAL, 0, TIER) == 0
    assert max_tokens_for_sol(INITIAL, -5, TIER) == 0
    assert max_tokens_for_sol(INITIAL, 1, TIER) == 0  # the `+ 1` and the fees cost at least 3 lamports
    assert max_tokens_for_sol(INITIAL, 10**15, TIER) == INITIAL.real_token_reserves
    assert max_tokens_for_sol(_after_buying(INITIAL.real_token_reserves), 10 * SOL, TIER) == 0  # nothing left


# --- the rates reach every quote ---------------------------------------------------------------------


def test_fee_rates_total() -> None:
    assert TIER.total_bps == 125
    assert NO_FEES.total_bps == 0


def test_each_fee_is_charged_at_its_own_rate() -> None:
    q = buy_quote(INITIAL, 10**12, FeeRates(protocol_bps=100, creator_bps=0))
    assert (q.protocol_fee, q.creator_fee) == (fee(q.sol_amount, 100), 0)
    s = sell_quote(INITIAL, 10**12, FeeRates(protocol_bps=0, creator_bps=50))
    assert (s.protocol_fee, s.creator_fee) == (0, fee(s.sol_amount, 50))
    # the curve side does not depend on the rates, only what the trader pays or gets does
    assert buy_quote(INITIAL, 10**12, NO_FEES).after == buy_quote(INITIAL, 10**12, TIER).after
    assert buy_sol_cost(INITIAL, 10**12, NO_FEES) < buy_sol_cost(INITIAL, 10**12, TIER)
    assert sell_sol_out(INITIAL, 10**12, NO_FEES) > sell_sol_out(INITIAL, 10**12, TIER)


def test_higher_rates_buy_fewer_tokens_for_the_same_sol() -> None:
    # the SDK's estimate divides by the total rate only: the split between the two fees does not matter
    assert buy_tokens_out(INITIAL, SOL, FeeRates(100, 0)) == buy_tokens_out(INITIAL, SOL, FeeRates(0, 100))
    no_fees, tier = buy_tokens_out(INITIAL, SOL, NO_FEES), buy_tokens_out(INITIAL, SOL, TIER)
    assert no_fees > tier > buy_tokens_out(INITIAL, SOL, FeeRates(200, 100))


# --- BuyQuote.completes -------------------------------------------------------------------------------


def test_completes_only_on_the_buy_that_takes_the_last_real_token() -> None:
    everything = buy_quote(INITIAL, INITIAL.real_token_reserves, TIER)
    assert everything.completes and everything.after.real_token_reserves == 0
    assert buy_quote(INITIAL, 10**18, TIER).completes  # capped at the real reserves
    assert not buy_quote(INITIAL, INITIAL.real_token_reserves - 1, TIER).completes
    last_one = buy_quote(_after_buying(INITIAL.real_token_reserves - 1), 1, TIER)
    assert last_one.token_amount == 1 and last_one.completes
    # nothing bought (zero, negative, or an already empty curve) completes nothing
    assert not buy_quote(INITIAL, 0, TIER).completes
    assert not buy_quote(INITIAL, -1, TIER).completes
    assert not buy_quote(everything.after, 10**12, TIER).completes


def test_completes_is_a_property_of_the_quote() -> None:
    after = CurveReserves(1, 1, 0, 1)
    assert BuyQuote(5, 10, 1, 1, after).completes
    assert not BuyQuote(0, 0, 0, 0, after).completes


# --- a migrated curve ---------------------------------------------------------------------------------


def test_every_quote_on_a_migrated_curve_is_zero() -> None:
    for r in (TIER, NO_FEES):
        assert buy_tokens_out(MIGRATED, SOL, r) == 0
        assert max_tokens_for_sol(MIGRATED, SOL, r) == 0
        assert buy_quote(MIGRATED, 10**12, r) == BuyQuote(0, 0, 0, 0, MIGRATED)
        assert buy_sol_cost(MIGRATED, 10**12, r) == 0
        q = sell_quote(MIGRATED, 10**12, r)
        assert (q.token_amount, q.sol_amount, q.sol_out, q.after) == (0, 0, 0, MIGRATED)
        assert sell_sol_out(MIGRATED, 10**12, r) == 0
    assert market_cap_lamports(MIGRATED, 10**15) == 0
    # only the virtual token reserves mark a migrated curve, as in the SDK
    leftover = CurveReserves(0, 30 * SOL, 5, 5)
    assert buy_quote(leftover, 5, TIER).token_amount == 0
    assert sell_quote(leftover, 5, TIER).sol_amount == 0


def test_a_curve_with_no_real_tokens_left_sells_nothing_to_buyers() -> None:
    empty = _after_buying(INITIAL.real_token_reserves)
    assert buy_tokens_out(empty, SOL, TIER) == 0
    assert buy_quote(empty, 10**12, TIER).token_amount == 0
