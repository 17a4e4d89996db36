"""The budget form of a buy (`buy_exact_sol_in`, `buy_exact_quote_in_v2`): spend a given amount, fees included,
for as many tokens as it buys. Pure integer math.

Source: the quote formulas in the `buy_exact_sol_in` docs of pump-fun/pump-public-docs `idl/pump.json`
(`total_fee_bps = protocol_fee_bps + creator_fee_bps`, the creator part 0 without a creator)::

    1. net = floor(spendable * 10_000 / (10_000 + total_fee_bps))
    2. fees = ceil(net * protocol_fee_bps / 10_000) + ceil(net * creator_fee_bps / 10_000)
    3. if net + fees > spendable: net = net - (net + fees - spendable)
    4. tokens_out = floor((net - 1) * virtual_token_reserves / (virtual_quote_reserves + net - 1))

Read here as the program charging what the formulas name: `net` goes to the curve, the two fees (step 2) to
their recipients. The buyer pays `net + fees`, which is the whole budget or one unit less (when the fee
rounding leaves one: the budget minus `net * (10_000 + bps) / 10_000` is below 1.0125 units before the
fees round up). That reading is an assumption: the docs give the quote, not the transfers.
"""

from __future__ import annotations

from pumpfun.curve import BPS_DENOMINATOR, BuyQuote, CurveReserves, FeeRates, fee

__all__ = ["exact_in_quote"]


def exact_in_quote(curve: CurveReserves, spendable: int, rates: FeeRates) -> BuyQuote:
    """The buy `spendable` (fees included) makes. `token_amount` 0: it buys nothing. The token amount is not
    capped at the real token reserves: a caller compares it with them (the program fails such a buy)."""
    if spendable <= 0 or curve.virtual_token_reserves == 0:
        return BuyQuote(0, 0, 0, 0, curve)
    net = spendable * BPS_DENOMINATOR // (BPS_DENOMINATOR + rates.total_bps)
    protocol_fee, creator_fee = fee(net, rates.protocol_bps), fee(net, rates.creator_bps)
    over = net + protocol_fee + creator_fee - spendable
    if over > 0:
        net -= over
    if net <= 1:
        return BuyQuote(0, 0, 0, 0, curve)
    tokens = (net - 1) * curve.virtual_token_reserves // (curve.virtual_sol_reserves + net - 1)
    if tokens <= 0:
        return BuyQuote(0, 0, 0, 0, curve)
    after = CurveReserves(
        virtual_token_reserves=curve.virtual_token_reserves - tokens,
        virtual_sol_reserves=curve.virtual_sol_reserves + net,
        real_token_reserves=curve.real_token_reserves - tokens,
        real_sol_reserves=curve.real_sol_reserves + net,
    )
    return BuyQuote(tokens, net, protocol_fee, creator_fee, after)
