"""What a trade build costs: a build fee plus a share of the trade's SOL notional, in credits. Pure.

::

    fee_credits = build_fee_credits
                + ceil(notional_lamports * notional_fee_bps * micro_usd_per_sol * credits_per_usdc
                       / (10_000 * 1_000_000_000 * 1_000_000))

- ``build_fee_credits``: the TRADE_BUILD class's price in the price table (``pricing.TRADE_BUILD``).
- ``notional_lamports``: what the trade moves in SOL. A snipe: its ``amount_sol`` budget. A sell: the
  gross SOL the curve pays for the tokens, before the protocol and creator fees (its estimate at build).
- ``notional_fee_bps``: the percentage, in basis points (10 = 0.10%).
- ``micro_usd_per_sol``: the SOL/USD rate, in millionths of a dollar per SOL, from a rate source
  (``PoolRate``: a SOL/USDC pool's reserves on the node; ``ConfiguredRate``, the operator's number, when the
  pool cannot be read).
- ``credits_per_usdc``: what one USDC buys (the deposit rate).

One division, at the end, rounded up: every intermediate is an exact integer, and the service never
charges less than the formula's exact value. Example: a 0.5 SOL snipe at 10 bps, $150.00/SOL and 100,000
credits per USDC is 0.5 x 150 = $75 of notional, 0.10% of it $0.075, i.e. 7,500 credits; with the
build fee of 50 the charge is 7,550 credits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

__all__ = ["SolUsdRate", "TradeFees"]

_BPS: Final = 10_000
_LAMPORTS_PER_SOL: Final = 1_000_000_000
_MICRO: Final = 1_000_000


@dataclass(frozen=True, slots=True)
class SolUsdRate:
    """A SOL/USD rate: ``micro_usd_per_sol`` millionths of a dollar per SOL, and where it comes from
    (``pool:<address>``: a SOL/USDC pool's reserves read from the node; ``configured``: the operator's number)."""

    micro_usd_per_sol: int
    source: str
    as_of: int | None = None  # Unix seconds the rate was read at; None for a configured one


@dataclass(frozen=True, slots=True)
class TradeFees:
    build_fee_credits: int
    notional_fee_bps: int
    credits_per_usdc: int

    def __post_init__(self) -> None:
        for name in ("build_fee_credits", "notional_fee_bps", "credits_per_usdc"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {value!r}")

    def notional_credits(self, notional_lamports: int, rate: SolUsdRate) -> int:
        """The percentage part: ``notional_fee_bps`` of the notional, in credits, rounded up."""
        numerator = notional_lamports * self.notional_fee_bps * rate.micro_usd_per_sol * self.credits_per_usdc
        return -(-numerator // (_BPS * _LAMPORTS_PER_SOL * _MICRO))

    def charge(self, notional_lamports: int, rate: SolUsdRate) -> int:
        """The credits a build of a trade with this SOL notional costs."""
        return self.build_fee_credits + self.notional_credits(notional_lamports, rate)

    def document(self, rate: SolUsdRate) -> dict[str, Any]:
        """The ``trade_builders`` object of ``GET /pricing``."""
        return {
            "methods": ["executeSnipe", "executeSell"],
            "build_fee_credits": self.build_fee_credits,
            "notional_fee_bps": self.notional_fee_bps,
            "sol_usd_micro": rate.micro_usd_per_sol,
            "rate_source": rate.source,
            "rate_as_of": rate.as_of,
            "sol_usd": {
                "rate": rate.micro_usd_per_sol,
                "unit": "micro-USD per SOL",
                "source": rate.source,
                "as_of": rate.as_of,
            },
            "credits_per_usdc": self.credits_per_usdc,
            "notional": "executeSnipe: amount_sol; executeSell: the gross SOL the curve pays, before its fees",
            "fee_credits": "build_fee_credits + ceil(notional_lamports * notional_fee_bps * sol_usd_micro "
            "* credits_per_usdc / (10000 * 10^9 * 10^6))",
        }
