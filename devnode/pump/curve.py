"""Bonding-curve math in integers, as in pump's `docs/bondingCurve.ts` (creator-fee era).

Uniswap-V2 style with virtual reserves. All amounts are base units: lamports (or quote base units) and
token base units (6 decimals). Fees: protocol 95 bps + creator 30 bps (the current bonding-curve tier).

    fee(x, bps)        = ceil(x * bps / 10_000)
    buy tokens_out     : input = sol_in * 10_000 / (10_000 + protocol_bps + creator_bps)
                         tokens = min(input * vTok / (vSol + input), realTok)
    buy sol_cost (n)   : n' = min(n, realTok); base = n' * vSol / (vTok - n') + 1
                         cost = base + fee(base, protocol) + fee(base, creator)
    sell sol_out (n)   : base = n * vSol / (vTok + n); out = base - fee(base, protocol) - fee(base, creator)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = [
    "BPS_DENOMINATOR",
    "CREATOR_FEE_BPS",
    "PROTOCOL_FEE_BPS",
    "BuyQuote",
    "CurveReserves",
    "SellQuote",
    "buy_quote",
    "buy_sol_cost",
    "buy_tokens_out",
    "fee",
    "market_cap_lamports",
    "sell_quote",
    "sell_sol_out",
]

BPS_DENOMINATOR: Final = 10_000
PROTOCOL_FEE_BPS: Final = 95
CREATOR_FEE_BPS: Final = 30


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
        return self.sol_amount + self.protocol_fee + self.creator_fee


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
        return self.sol_amount - self.protocol_fee - self.creator_fee


def fee(amount: int, bps: int) -> int:
    """`ceil(amount * bps / 10_000)`."""
    return (amount * bps + BPS_DENOMINATOR - 1) // BPS_DENOMINATOR


def buy_tokens_out(
    curve: CurveReserves,
    sol_in: int,
    protocol_bps: int = PROTOCOL_FEE_BPS,
    creator_bps: int = CREATOR_FEE_BPS,
) -> int:
    """Tokens bought for `sol_in` lamports, fees included."""
    if sol_in <= 0:
        return 0
    net = sol_in * BPS_DENOMINATOR // (BPS_DENOMINATOR + protocol_bps + creator_bps)
    tokens = net * curve.virtual_token_reserves // (curve.virtual_sol_reserves + net)
    return min(tokens, curve.real_token_reserves)


def buy_sol_cost(
    curve: CurveReserves,
    token_amount: int,
    protocol_bps: int = PROTOCOL_FEE_BPS,
    creator_bps: int = CREATOR_FEE_BPS,
) -> int:
    """Lamports, fees included, that buying `token_amount` tokens costs."""
    return buy_quote(curve, token_amount, protocol_bps, creator_bps).total_cost


def buy_quote(
    curve: CurveReserves,
    token_amount: int,
    protocol_bps: int = PROTOCOL_FEE_BPS,
    creator_bps: int = CREATOR_FEE_BPS,
) -> BuyQuote:
    """The full effect of buying `token_amount` tokens (capped at the real token reserves)."""
    n = min(token_amount, curve.real_token_reserves)
    if n <= 0:
        return BuyQuote(0, 0, 0, 0, curve)
    base = n * curve.virtual_sol_reserves // (curve.virtual_token_reserves - n) + 1
    after = CurveReserves(
        virtual_token_reserves=curve.virtual_token_reserves - n,
        virtual_sol_reserves=curve.virtual_sol_reserves + base,
        real_token_reserves=curve.real_token_reserves - n,
        real_sol_reserves=curve.real_sol_reserves + base,
    )
    return BuyQuote(n, base, fee(base, protocol_bps), fee(base, creator_bps), after)


def sell_sol_out(
    curve: CurveReserves,
    token_amount: int,
    protocol_bps: int = PROTOCOL_FEE_BPS,
    creator_bps: int = CREATOR_FEE_BPS,
) -> int:
    """Lamports the seller receives for `token_amount` tokens, after fees."""
    return sell_quote(curve, token_amount, protocol_bps, creator_bps).sol_out


def sell_quote(
    curve: CurveReserves,
    token_amount: int,
    protocol_bps: int = PROTOCOL_FEE_BPS,
    creator_bps: int = CREATOR_FEE_BPS,
) -> SellQuote:
    """The full effect of selling `token_amount` tokens into the curve."""
    if token_amount <= 0:
        return SellQuote(0, 0, 0, 0, curve)
    base = token_amount * curve.virtual_sol_reserves // (curve.virtual_token_reserves + token_amount)
    after = CurveReserves(
        virtual_token_reserves=curve.virtual_token_reserves + token_amount,
        virtual_sol_reserves=curve.virtual_sol_reserves - base,
        real_token_reserves=curve.real_token_reserves + token_amount,
        real_sol_reserves=curve.real_sol_reserves - base,
    )
    return SellQuote(token_amount, base, fee(base, protocol_bps), fee(base, creator_bps), after)


def market_cap_lamports(curve: CurveReserves, mint_supply: int) -> int:
    """`vSol * mint_supply / vTok`, the figure fee tiers are looked up by."""
    return curve.virtual_sol_reserves * mint_supply // curve.virtual_token_reserves
