"""Which fees a trade on a curve pays and who may receive them, read from the `Global` account.

Sources: pump-fun/pump-public-docs `docs/bondingCurve.ts` (commit e2b66e4: the protocol fee is
`Global.fee_basis_points`; the creator fee `Global.creator_fee_basis_points`, charged only when the curve
has a creator) and `docs/FEE_RECIPIENTS.md` (a mayhem-mode coin pays one of the reserved recipients,
every other coin one of the normal ones; every legacy buy and sell also names a buyback recipient).

Not modelled: the fee program's market-cap tiers (`FeeConfig.fee_tiers`, docs/FEE_PROGRAM_README.md)
that override these rates where a fee config exists, and `Global.buyback_basis_points`, which the
published fee formula predates (the devnode's Global sets it to 0).
"""

from __future__ import annotations

from solders.pubkey import Pubkey

from pumpfun.accounts import BondingCurve, Global
from pumpfun.curve import FeeRates

__all__ = ["buyback_fee_recipients", "fee_rates", "fee_recipients"]


def fee_rates(global_: Global, curve: BondingCurve) -> FeeRates:
    """The protocol and creator basis points a trade on `curve` pays (no creator: no creator fee).

    A buy in the transaction that creates the curve pays the creator fee (the SDK's `isNewBondingCurve`):
    price it on `BondingCurve.new(creator)`, which has its creator."""
    creator_bps = global_.creator_fee_basis_points if curve.creator != Pubkey.default() else 0
    return FeeRates(protocol_bps=global_.fee_basis_points, creator_bps=creator_bps)


def fee_recipients(global_: Global, curve: BondingCurve) -> tuple[Pubkey, ...]:
    """The accounts a trade on `curve` may name as `fee_recipient` (reserved ones for a mayhem-mode coin)."""
    if curve.is_mayhem_mode:
        return (global_.reserved_fee_recipient, *global_.reserved_fee_recipients)
    return (global_.fee_recipient, *global_.fee_recipients)


def buyback_fee_recipients(global_: Global) -> tuple[Pubkey, ...]:
    """The accounts a legacy buy or sell may name as its buyback fee recipient (the last remaining account)."""
    return tuple(global_.buyback_fee_recipients)
