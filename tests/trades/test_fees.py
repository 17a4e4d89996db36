"""What a build costs (gateway.trades.fees) and where the rate comes from (gateway.trades.sol_usd)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.trades.fees import SolUsdRate, TradeFees
from gateway.trades.sol_usd import CachedRate, ConfiguredRate

RATE = SolUsdRate(150_000_000, "configured")
FEES = TradeFees(build_fee_credits=50, notional_fee_bps=10, credits_per_usdc=100_000)
DENOMINATOR = 10_000 * 10**9 * 10**6


def test_the_documented_example() -> None:
    # 0.5 SOL at $150: $75 of notional; 0.10% of it is $0.075 = 7,500 credits; plus the build fee.
    assert FEES.notional_credits(500_000_000, RATE) == 7_500
    assert FEES.charge(500_000_000, RATE) == 7_550


def test_rounding_is_up_and_only_up() -> None:
    assert FEES.notional_credits(0, RATE) == 0
    assert FEES.notional_credits(1, RATE) == 1  # a lamport's share is a tiny fraction of a credit: 1
    assert FEES.notional_credits(66_666, RATE) == 1  # 0.99999 credits
    assert FEES.notional_credits(66_667, RATE) == 2  # 1.000005 credits


@given(
    notional=st.integers(0, 10**15),
    bps=st.integers(0, 1_000),
    rate=st.integers(1, 10**12),
    per_usdc=st.integers(1, 10**9),
)
def test_the_charge_never_falls_below_the_exact_value(notional: int, bps: int, rate: int, per_usdc: int) -> None:
    fees = TradeFees(7, bps, per_usdc)
    exact = notional * bps * rate * per_usdc
    share = fees.notional_credits(notional, SolUsdRate(rate, "configured"))
    assert share * DENOMINATOR >= exact > (share - 1) * DENOMINATOR or share == exact == 0
    assert fees.charge(notional, SolUsdRate(rate, "configured")) == 7 + share


def test_pricing_view_names_the_rate_as_configured() -> None:
    doc = FEES.document(RATE)
    assert doc["build_fee_credits"] == 50 and doc["notional_fee_bps"] == 10
    assert doc["sol_usd_micro"] == 150_000_000 and doc["rate_source"] == "configured" and doc["rate_as_of"] is None
    assert doc["methods"] == ["executeSnipe", "executeSell"]


def test_fees_refuse_negative_or_non_integer_parts() -> None:
    with pytest.raises(ValueError, match="notional_fee_bps"):
        TradeFees(50, -1, 100_000)
    with pytest.raises(ValueError, match="build_fee_credits"):
        TradeFees(1.5, 10, 100_000)  # type: ignore[arg-type]


async def test_configured_rate_and_the_cache() -> None:
    assert await ConfiguredRate(150_000_000).rate() == RATE
    with pytest.raises(ValueError):
        ConfiguredRate(0)

    class Counting:
        calls = 0

        async def rate(self) -> SolUsdRate:
            self.calls += 1
            return SolUsdRate(100 + self.calls, "counting")

    now = [0.0]
    source = Counting()
    cached = CachedRate(source, ttl_s=10, clock=lambda: now[0])
    assert (await cached.rate()).micro_usd_per_sol == 101
    now[0] = 9.9
    assert (await cached.rate()).micro_usd_per_sol == 101 and source.calls == 1
    now[0] = 10.0
    assert (await cached.rate()).micro_usd_per_sol == 102 and source.calls == 2
