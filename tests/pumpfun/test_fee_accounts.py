"""pumpfun.fees: a trade's fee rates and recipients come from the `Global` account (as the chain holds it),
the creator fee only where the curve has a creator; and the Global layout the builders read them from."""

from __future__ import annotations

import struct
from dataclasses import replace

from solders.keypair import Keypair
from solders.pubkey import Pubkey

from pumpfun.accounts import BondingCurve, Global, decode_global, encode_global
from pumpfun.curve import FeeRates, buy_quote, fee, sell_quote
from pumpfun.fees import buyback_fee_recipients, fee_rates, fee_recipients
from pumpfun.ids import BUYBACK_FEE_RECIPIENTS, FEE_RECIPIENTS, RESERVED_FEE_RECIPIENTS

CREATOR = Keypair.from_seed(bytes([7] * 32)).pubkey()
WITH_CREATOR = BondingCurve.new(CREATOR)
NO_CREATOR = BondingCurve.new(Pubkey.default())  # a curve from before the creator fee (May 2025)


def on_chain(g: Global) -> Global:
    """The Global as a client reads it: through its account data."""
    return decode_global(encode_global(g))


def test_the_example_global_charges_the_current_tier() -> None:
    assert fee_rates(on_chain(Global()), WITH_CREATOR) == FeeRates(protocol_bps=95, creator_bps=30)


def test_the_rates_are_the_global_fields() -> None:
    g = on_chain(Global(fee_basis_points=100, creator_fee_basis_points=5))
    assert fee_rates(g, WITH_CREATOR) == FeeRates(protocol_bps=100, creator_bps=5)
    assert fee_rates(on_chain(Global(fee_basis_points=0, creator_fee_basis_points=0)), WITH_CREATOR).total_bps == 0


def test_a_curve_without_a_creator_pays_no_creator_fee() -> None:
    g = on_chain(Global())
    rates = fee_rates(g, NO_CREATOR)
    assert rates == FeeRates(protocol_bps=95, creator_bps=0)
    q = buy_quote(NO_CREATOR.reserves, 10**12, rates)
    assert q.creator_fee == 0 and q.protocol_fee == fee(q.sol_amount, 95)
    s = sell_quote(NO_CREATOR.reserves, 10**12, rates)
    assert s.creator_fee == 0 and s.sol_out == s.sol_amount - fee(s.sol_amount, 95)


def test_a_mayhem_coin_pays_a_reserved_recipient_every_other_coin_a_normal_one() -> None:
    g = on_chain(Global())
    assert fee_recipients(g, WITH_CREATOR) == FEE_RECIPIENTS
    mayhem = BondingCurve.new(CREATOR, is_mayhem_mode=True)
    assert fee_recipients(g, mayhem) == RESERVED_FEE_RECIPIENTS
    assert not set(fee_recipients(g, mayhem)) & set(FEE_RECIPIENTS)
    assert fee_rates(g, mayhem) == fee_rates(g, WITH_CREATOR)  # mayhem changes the recipient, not the rates


def test_recipients_follow_the_account_not_the_published_lists() -> None:
    mine = tuple(Keypair.from_seed(bytes([i] * 32)).pubkey() for i in range(1, 9))
    g = on_chain(replace(Global(), fee_recipient=mine[0], fee_recipients=mine[1:], buyback_fee_recipients=mine))
    assert fee_recipients(g, WITH_CREATOR) == mine
    assert buyback_fee_recipients(g) == mine


def test_the_example_global_lists_the_published_buyback_recipients() -> None:
    assert buyback_fee_recipients(on_chain(Global())) == BUYBACK_FEE_RECIPIENTS
    assert len(BUYBACK_FEE_RECIPIENTS) == 8 and len(set(BUYBACK_FEE_RECIPIENTS)) == 8


def test_the_global_arrays_sit_where_borsh_puts_them() -> None:
    data = encode_global(Global(buyback_basis_points=7))
    # ... creator_fee_basis_points ends at 162; fee_recipients[7] 224 -> 386; set_creator_authority,
    # admin_set_creator_authority 64 -> 450; create_v2_enabled 1 -> 451; whitelist_pda, reserved_fee_recipient
    # 64 -> 515; mayhem_mode_enabled 1 -> 516; reserved_fee_recipients[7] 224 -> 740; is_cashback_enabled -> 741
    assert Pubkey.from_bytes(data[162:194]) == FEE_RECIPIENTS[1]
    assert Pubkey.from_bytes(data[483:515]) == RESERVED_FEE_RECIPIENTS[0]
    assert Pubkey.from_bytes(data[741:773]) == BUYBACK_FEE_RECIPIENTS[0]
    assert struct.unpack_from("<Q", data, 741 + 8 * 32)[0] == 7
    assert len(data) == 741 + 8 * 32 + 8 + 8 + 32  # then initial_virtual_quote_reserves, whitelisted_quote_mints[1]
