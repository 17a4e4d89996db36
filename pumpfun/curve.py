"""Bonding-curve math in the program's integer arithmetic, with the protocol and creator fees.

Source: pump-fun/pump-public-docs `docs/bondingCurve.ts` (commit e2b66e4, the creator-fee era), the
SDK's mirror of the program. Uniswap-V2 style with virtual reserves; amounts are base units: lamports
(or quote base units) and token base units (6 decimals). The fee rates are passed in (`FeeRates`,
read from the `Global` account by `pumpfun.fees.fee_rates`), never assumed.

    fee(x, bps)        = ceil(x * bps / 10_000)                      rounds in the protocol's favour
    buy tokens_out     : input = sol_in * 10_000 / (10_000 + protocol_bps + creator_bps)
                         tokens = min(input * vTok / (vSol + input), realTok)
    buy sol_cost (n)   : n' = min(n, realTok); base = n' * vSol / (vTok - n') + 1
                         cost = base + fee(base, protocol) + fee(base, creator)
    sell sol_out (n)   : base = n * vSol / (vTok + n); out = base - fee(base, protocol) - fee(base, creator)

A curve whose virtual token reserves are 0 has migrated: every quote on it is zero, as in the SDK.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = [
    "BPS_DENOMINATOR",
    "BuyQuote",
    "CurveReserves",
    "FeeRates",
    "SellQuote",
    "buy_quote",
    "buy_sol_cost",
    "buy_tokens_out",
    "fee",
    "market_cap_lamports",
    "max_tokens_for_sol",
    "sell_quote",
    "sell_sol_out",
]

BPS_DENOMINATOR: Final = 10_000


@dataclass(frozen=True)
class FeeRates:
    """The fee basis points a trade pays: protocol (to the fee recipient) and creator (to the creator vault)."""

    protocol_bps: int
    creator_bps: int

    @property
    def total_bps(self) -> int:
        return self.protocol_bps + self.creator_bps


@dataclass(frozen=True)
class CurveReserves:
    """The reserves the math reads: virtual token/SOL and real token/SOL."""

    virtual_token_reserves: int
    virtual_sol_reserves: int
    real_token_reserves: int
    real_sol_reserves: int


@dataclass(frozen=True)
class BuyQuote:
    """A buy of `token_amount` tokens: `sol_amount` goes to the curve, the fees to their recipients."""

    token_amount: int
    sol_amount: int
    protocol_fee: int
    creator_fee: int
    after: CurveReserves

    @property
    def total_cost(self) -> int:
        """What the buyer pays: compare with `max_sol_cost`."""
        return self.sol_amount + self.protocol_fee + self.creator_fee

    @property
    def completes(self) -> bool:
        """The buy takes the last real token: the curve becomes complete."""
        return self.token_amount > 0 and self.after.real_token_reserves == 0


@dataclass(frozen=True)
class SellQuote:
    """A sell of `token_amount` tokens: the curve pays `sol_amount`, the user gets `sol_out` after fees."""

    token_amount: int
    sol_amount: int
    protocol_fee: int
    creator_fee: int
    after: CurveReserves

    @property
    def sol_out(self) -> int:
        """What the seller receives: compare with `min_sol_output`. Below zero (as in the SDK) when a sell is
        too small for its rounded-up fees: no such sell can pay out, check `sol_out > 0` before building one."""
        return self.sol_amount - self.protocol_fee - self.creator_fee


def fee(amount: int, bps: int) -> int:
    """`ceil(amount * bps / 10_000)`: a fee never rounds in the trader's favour."""
    return (amount * bps + BPS_DENOMINATOR - 1) // BPS_DENOMINATOR


def _migrated(curve: CurveReserves) -> bool:
    return curve.virtual_token_reserves == 0


def buy_tokens_out(curve: CurveReserves, sol_in: int, rates: FeeRates) -> int:
    """Tokens `sol_in` lamports (fees included) buy, by the SDK's formula (`getBuyTokenAmountFromSolAmount`).

    Buying exactly this many tokens can cost a few lamports more than `sol_in` (the `+ 1` and the fee
    rounding); `max_tokens_for_sol` gives the largest amount whose cost stays within a budget."""
    if sol_in <= 0 or _migrated(curve):
        return 0
    net = sol_in * BPS_DENOMINATOR // (BPS_DENOMINATOR + rates.total_bps)
    tokens = net * curve.virtual_token_reserves // (curve.virtual_sol_reserves + net)
    return min(tokens, curve.real_token_reserves)


def _cost_of_base(base: int, rates: FeeRates) -> int:
    return base + fee(base, rates.protocol_bps) + fee(base, rates.creator_bps)


def max_tokens_for_sol(curve: CurveReserves, budget: int, rates: FeeRates) -> int:
    """The largest token amount whose buy costs at most `budget` lamports, fees included (0 if none does).

    Inverts `buy_quote` exactly: the largest base (curve lamports) with `base + fees <= budget`, then the
    largest `n` with `n * vSol // (vTok - n) + 1 <= base`, i.e. `n = (base * vTok - 1) // (vSol + base)`."""
    if budget <= 0 or _migrated(curve) or curve.real_token_reserves <= 0:
        return 0
    # No larger base fits (its cost exceeds base * (10_000 + bps) / 10_000 > budget); the two fee
    # roundings put this one at most 2 lamports over, so the loop runs at most a few steps.
    base = budget * BPS_DENOMINATOR // (BPS_DENOMINATOR + rates.total_bps)
    while base > 0 and _cost_of_base(base, rates) > budget:
        base -= 1
    if base <= 0:
        return 0
    tokens = (base * curve.virtual_token_reserves - 1) // (curve.virtual_sol_reserves + base)
    return min(tokens, curve.real_token_reserves)


def buy_quote(curve: CurveReserves, token_amount: int, rates: FeeRates) -> BuyQuote:
    """The full effect of buying `token_amount` tokens (capped at the real token reserves)."""
    n = min(token_amount, curve.real_token_reserves)
    if n <= 0 or _migrated(curve):
        return BuyQuote(0, 0, 0, 0, curve)
    base = n * curve.virtual_sol_reserves // (curve.virtual_token_reserves - n) + 1
    after = CurveReserves(
        virtual_token_reserves=curve.virtual_token_reserves - n,
        virtual_sol_reserves=curve.virtual_sol_reserves + base,
        real_token_reserves=curve.real_token_reserves - n,
        real_sol_reserves=curve.real_sol_reserves + base,
    )
    return BuyQuote(n, base, fee(base, rates.protocol_bps), fee(base, rates.creator_bps), after)


def buy_sol_cost(curve: CurveReserves, token_amount: int, rates: FeeRates) -> int:
    """Lamports, fees included, that buying `token_amount` tokens costs."""
    return buy_quote(curve, token_amount, rates).total_cost


def sell_quote(curve: CurveReserves, token_amount: int, rates: FeeRates) -> SellQuote:
    """The full effect of selling `token_amount` tokens into the curve."""
    if token_amount <= 0 or _migrated(curve):
        return SellQuote(0, 0, 0, 0, curve)
    base = token_amount * curve.virtual_sol_reserves // (curve.virtual_token_reserves + token_amount)
    after = CurveReserves(
        virtual_token_reserves=curve.virtual_token_reserves + token_amount,
        virtual_sol_reserves=curve.virtual_sol_reserves - base,
        real_token_reserves=curve.real_token_reserves + token_amount,
        real_sol_reserves=curve.real_sol_reserves - base,
    )
    return SellQuote(token_amount, base, fee(base, rates.protocol_bps), fee(base, rates.creator_bps), after)


def sell_sol_out(curve: CurveReserves, token_amount: int, rates: FeeRates) -> int:
    """Lamports the seller receives for `token_amount` tokens, after fees."""
    return sell_quote(curve, token_amount, rates).sol_out


def market_cap_lamports(curve: CurveReserves, mint_supply: int) -> int:
    """`vSol * mint_supply / vTok`, the figure fee tiers are looked up by."""
    if _migrated(curve):
        return 0
    return curve.virtual_sol_reserves * mint_supply // curve.virtual_token_reserves
