"""Account layouts of pumpfun: BondingCurve at its documented offsets, Global, Pool, SPL packers."""

from __future__ import annotations

import struct

import pytest
from solders.keypair import Keypair
from solders.pubkey import Pubkey
from solders.token.state import Mint, TokenAccount

from pumpfun import spl
from pumpfun._borsh import BorshError
from pumpfun.accounts import (
    BONDING_CURVE_ACCOUNT_SIZE,
    BONDING_CURVE_DISCRIMINATOR,
    INITIAL_REAL_TOKEN_RESERVES,
    INITIAL_VIRTUAL_SOL_RESERVES,
    INITIAL_VIRTUAL_TOKEN_RESERVES,
    TOKEN_TOTAL_SUPPLY,
    BondingCurve,
    Global,
    Pool,
    decode_bonding_curve,
    decode_global,
    decode_pool,
    encode_bonding_curve,
    encode_global,
    encode_pool,
)
from pumpfun.ids import FEE_RECIPIENTS, USDC_MINT

CREATOR = Keypair.from_seed(bytes([9] * 32)).pubkey()


def sample_curve() -> BondingCurve:
    return BondingCurve(
        virtual_token_reserves=1_000_000_000_000_001,
        virtual_sol_reserves=30_000_000_002,
        real_token_reserves=700_000_000_000_003,
        real_sol_reserves=4_000_000_004,
        token_total_supply=TOKEN_TOTAL_SUPPLY,
        complete=True,
        creator=CREATOR,
        is_mayhem_mode=True,
        is_cashback_coin=False,
        quote_mint=USDC_MINT,
    )


def test_bonding_curve_fields_sit_at_the_documented_offsets() -> None:
    curve = sample_curve()
    data = encode_bonding_curve(curve)
    assert len(data) == BONDING_CURVE_ACCOUNT_SIZE == 150
    assert data[:8] == BONDING_CURVE_DISCRIMINATOR == bytes([23, 183, 248, 55, 96, 216, 172, 96])
    assert struct.unpack_from("<QQQQQ", data, 8) == (
        1_000_000_000_000_001,
        30_000_000_002,
        700_000_000_000_003,
        4_000_000_004,
        TOKEN_TOTAL_SUPPLY,
    )
    assert data[48] == 1  # complete
    assert data[49:81] == bytes(CREATOR)  # creator
    assert data[81] == 1  # is_mayhem_mode
    assert data[82] == 0  # is_cashback_coin
    assert data[83:115] == bytes(USDC_MINT)  # quote_mint
    assert data[115:] == bytes(35)  # the allocated tail is zero


def test_bonding_curve_round_trips() -> None:
    curve = sample_curve()
    assert decode_bonding_curve(encode_bonding_curve(curve)) == curve


def test_a_sol_coin_stores_the_default_quote_mint() -> None:
    curve = BondingCurve.new(CREATOR)
    data = encode_bonding_curve(curve)
    assert data[83:115] == bytes(32)
    assert curve.is_sol_quoted
    assert (curve.virtual_token_reserves, curve.virtual_sol_reserves, curve.real_token_reserves) == (
        INITIAL_VIRTUAL_TOKEN_RESERVES,
        INITIAL_VIRTUAL_SOL_RESERVES,
        INITIAL_REAL_TOKEN_RESERVES,
    )


def test_older_shorter_bonding_curves_decode_with_defaults() -> None:
    full = encode_bonding_curve(sample_curve())
    pre_mayhem = full[:81]  # the May 2025 layout ends after `creator`
    decoded = decode_bonding_curve(pre_mayhem)
    assert decoded.creator == CREATOR
    assert decoded.is_mayhem_mode is False
    assert decoded.quote_mint == Pubkey.default()


def test_bonding_curve_decoder_rejects_other_accounts() -> None:
    with pytest.raises(BorshError):
        decode_bonding_curve(bytes(150))


def test_global_round_trips_with_the_documented_example_values() -> None:
    g = Global()
    decoded = decode_global(encode_global(g))
    assert decoded == g
    assert decoded.initial_virtual_token_reserves == 1_073_000_000_000_000
    assert decoded.initial_virtual_sol_reserves == 30_000_000_000
    assert decoded.initial_real_token_reserves == 793_100_000_000_000
    assert decoded.token_total_supply == 1_000_000_000_000_000
    assert decoded.pool_migration_fee == 15_000_001
    assert (decoded.fee_basis_points, decoded.creator_fee_basis_points) == (95, 30)
    assert decoded.fee_recipient == FEE_RECIPIENTS[0]
    assert decoded.fee_recipients == FEE_RECIPIENTS[1:]


def test_global_fee_fields_sit_where_borsh_puts_them() -> None:
    data = encode_global(Global(fee_basis_points=123, creator_fee_basis_points=45))
    # 8 disc + initialized(1) + authority(32) + fee_recipient(32) + 4 reserves/supply u64s (32) = 105
    assert struct.unpack_from("<Q", data, 105)[0] == 123
    # + fee_basis_points(8) + withdraw_authority(32) + enable_migrate(1) + pool_migration_fee(8) = 154
    assert struct.unpack_from("<Q", data, 154)[0] == 45


def test_pool_round_trips() -> None:
    keys = [Keypair.from_seed(bytes([i] * 32)).pubkey() for i in range(1, 8)]
    pool = Pool(254, 0, keys[0], keys[1], keys[2], keys[3], keys[4], keys[5], 123_456, keys[6])
    assert decode_pool(encode_pool(pool)) == pool


def test_spl_mint_layout_parses_with_solders() -> None:
    authority = Keypair.from_seed(bytes([3] * 32)).pubkey()
    data = spl.pack_mint(TOKEN_TOTAL_SUPPLY, 6, mint_authority=authority)
    assert len(data) == spl.MINT_SIZE == 82
    mint = Mint.from_bytes(data)
    assert (mint.supply, mint.decimals, mint.is_initialized) == (TOKEN_TOTAL_SUPPLY, 6, True)
    assert mint.mint_authority == authority
    assert mint.freeze_authority is None
    revoked = Mint.from_bytes(spl.pack_mint(5, 6))
    assert revoked.mint_authority is None


def test_spl_token_account_layout_parses_with_solders() -> None:
    mint, owner = Keypair.from_seed(bytes([4] * 32)).pubkey(), Keypair.from_seed(bytes([5] * 32)).pubkey()
    data = spl.pack_token_account(spl.TokenAccountState(mint, owner, 42))
    assert len(data) == spl.TOKEN_ACCOUNT_SIZE == 165
    account = TokenAccount.from_bytes(data)
    assert (account.mint, account.owner, account.amount) == (mint, owner, 42)
    assert account.is_native is None
    native = TokenAccount.from_bytes(spl.pack_token_account(spl.TokenAccountState(mint, owner, 7, 2_039_280)))
    assert native.is_native == 2_039_280
    assert spl.decode_token_account_amount(data) == 42


def test_token_2022_layouts_carry_the_account_type_and_extensions() -> None:
    mint, owner = Keypair.from_seed(bytes([6] * 32)).pubkey(), Keypair.from_seed(bytes([7] * 32)).pubkey()
    account = spl.pack_token_account_2022(spl.TokenAccountState(mint, owner, 9))
    assert len(account) == spl.TOKEN_2022_ACCOUNT_SIZE == 170
    assert TokenAccount.from_bytes(account[:165]).amount == 9
    assert account[165] == 2  # AccountType::Account
    assert struct.unpack_from("<HH", account, 166) == (spl.EXT_IMMUTABLE_OWNER, 0)

    data = spl.pack_mint_2022_with_metadata(mint, TOKEN_TOTAL_SUPPLY, 6, "Moon Cat", "MCAT", "https://x/y", owner)
    assert Mint.from_bytes(data[:82]).supply == TOKEN_TOTAL_SUPPLY
    assert data[82:165] == bytes(83)
    assert data[165] == 1  # AccountType::Mint
    ext_type, length = struct.unpack_from("<HH", data, 166)
    assert (ext_type, length) == (spl.EXT_METADATA_POINTER, 64)
    assert data[170 + 32 : 170 + 64] == bytes(mint)  # the metadata pointer points at the mint itself
    ext_type, length = struct.unpack_from("<HH", data, 234)
    assert ext_type == spl.EXT_TOKEN_METADATA
    assert len(data) == 238 + length
    assert b"Moon Cat" in data[238:] and b"MCAT" in data[238:]


def test_rent_exemption_matches_mainnet_figures() -> None:
    assert spl.rent_exempt_minimum(0) == 890_880
    assert spl.rent_exempt_minimum(82) == 1_461_600
    assert spl.rent_exempt_minimum(165) == 2_039_280
