"""Instruction data and account orders, and the Anchor event encodings (emit_cpi and `Program data:`)."""

from __future__ import annotations

import base64
import struct

import pytest
from solders.keypair import Keypair
from solders.pubkey import Pubkey

from pumpfun import instructions as ix
from pumpfun import pda
from pumpfun._borsh import BorshError
from pumpfun.events import (
    EVENT_IX_TAG_LE,
    CompleteEvent,
    CompletePumpAmmMigrationEvent,
    CreateEvent,
    CreatePoolEvent,
    Event,
    Shareholder,
    TradeEvent,
    decode_event,
    decode_event_cpi,
    decode_program_data_log,
    encode_event,
    event_cpi_data,
    program_data_log,
)
from pumpfun.ids import (
    FEE_PROGRAM_ID,
    MPL_TOKEN_METADATA_PROGRAM_ID,
    PUMP_AMM_PROGRAM_ID,
    PUMP_PROGRAM_ID,
    TOKEN_2022_PROGRAM_ID,
    TOKEN_PROGRAM_ID,
    USDC_MINT,
    WSOL_MINT,
)

MINT = Keypair.from_seed(bytes([11] * 32)).pubkey()
USER = Keypair.from_seed(bytes([12] * 32)).pubkey()
CREATOR = Keypair.from_seed(bytes([13] * 32)).pubkey()
FEE = Keypair.from_seed(bytes([14] * 32)).pubkey()
BUYBACK = Keypair.from_seed(bytes([15] * 32)).pubkey()


def test_buy_data_is_discriminator_and_borsh_args() -> None:
    data = ix.encode_buy(ix.BuyArgs(amount=1_000_000, max_sol_cost=2_000_000, track_volume=True))
    assert data == bytes([102, 6, 61, 18, 1, 218, 235, 234]) + struct.pack("<QQB", 1_000_000, 2_000_000, 1)
    assert ix.decode_pump_instruction(data) == ix.BuyArgs(1_000_000, 2_000_000, True)


def test_sell_and_create_data_round_trip() -> None:
    sell = ix.SellArgs(amount=5, min_sol_output=6)
    assert ix.decode_pump_instruction(ix.encode_sell(sell)) == sell
    create = ix.CreateArgs("Moon Cat", "MCAT", "https://ipfs.io/ipfs/Qm", CREATOR)
    data = ix.encode_create(create)
    assert data[8:12] == struct.pack("<I", 8) and data[12:20] == b"Moon Cat"
    assert ix.decode_pump_instruction(data) == create
    v2 = ix.CreateV2Args("Moon Cat", "MCAT", "https://x", CREATOR, is_mayhem_mode=False, is_cashback_enabled=False)
    assert ix.decode_pump_instruction(ix.encode_create_v2(v2)) == v2
    assert ix.decode_pump_instruction(ix.MIGRATE_DISCRIMINATOR) is None
    with pytest.raises(BorshError):
        ix.decode_pump_instruction(bytes(16))


def test_create_pool_data_round_trips() -> None:
    args = ix.CreatePoolArgs(
        index=0, base_amount_in=206_900_000_000_000, quote_amount_in=84_000_000_000, coin_creator=CREATOR
    )
    data = ix.encode_create_pool(args)
    assert data[:8] == bytes([233, 146, 209, 142, 207, 104, 64, 188])
    assert data[8:10] == b"\x00\x00"
    assert ix.decode_amm_instruction(data) == args


def test_buy_has_18_accounts_in_the_documented_order() -> None:
    metas = ix.buy_accounts(MINT, USER, CREATOR, FEE, BUYBACK)
    keys = [m.pubkey for m in metas]
    assert len(metas) == 18
    assert keys[0] == pda.global_pda()
    assert keys[1] == FEE and metas[1].is_writable
    assert keys[2] == MINT
    assert keys[3] == pda.bonding_curve_pda(MINT) and metas[3].is_writable
    assert keys[4] == pda.associated_bonding_curve_pda(MINT)
    assert keys[5] == pda.associated_token_address(USER, MINT)
    assert keys[6] == USER and metas[6].is_signer and metas[6].is_writable
    assert keys[8] == TOKEN_PROGRAM_ID and keys[9] == pda.creator_vault_pda(CREATOR)  # token_program, creator_vault
    assert keys[10] == pda.event_authority_pda() and keys[11] == PUMP_PROGRAM_ID
    assert keys[12] == pda.global_volume_accumulator_pda()
    assert keys[13] == pda.user_volume_accumulator_pda(USER)
    assert keys[14] == pda.fee_config_pda() and keys[15] == FEE_PROGRAM_ID
    assert keys[16] == pda.bonding_curve_v2_pda(MINT) and not metas[16].is_writable
    assert keys[17] == BUYBACK and metas[17].is_writable


def test_sell_has_16_accounts_with_creator_vault_before_token_program() -> None:
    metas = ix.sell_accounts(MINT, USER, CREATOR, FEE, BUYBACK, TOKEN_2022_PROGRAM_ID)
    keys = [m.pubkey for m in metas]
    assert len(metas) == 16
    assert keys[8] == pda.creator_vault_pda(CREATOR)
    assert keys[9] == TOKEN_2022_PROGRAM_ID
    assert keys[4] == pda.associated_bonding_curve_pda(MINT, TOKEN_2022_PROGRAM_ID)
    assert keys[12] == pda.fee_config_pda() and keys[13] == FEE_PROGRAM_ID
    assert keys[14] == pda.bonding_curve_v2_pda(MINT) and keys[15] == BUYBACK


def test_create_and_create_v2_account_orders() -> None:
    classic = ix.create_accounts(MINT, USER)
    assert len(classic) == 14
    assert classic[0].pubkey == MINT and classic[0].is_signer
    assert classic[5].pubkey == MPL_TOKEN_METADATA_PROGRAM_ID
    assert classic[7].pubkey == USER and classic[7].is_signer
    assert classic[9].pubkey == TOKEN_PROGRAM_ID
    v2 = ix.create_v2_accounts(MINT, USER)
    assert len(v2) == 16
    assert v2[5].pubkey == USER and v2[7].pubkey == TOKEN_2022_PROGRAM_ID
    assert v2[14].pubkey == pda.event_authority_pda() and v2[15].pubkey == PUMP_PROGRAM_ID
    quoted = ix.create_v2_accounts(MINT, USER, ix.QuoteAccounts(USDC_MINT))
    assert len(quoted) == 19
    assert [m.pubkey for m in quoted[16:]] == [
        USDC_MINT,
        pda.associated_token_address(pda.bonding_curve_pda(MINT), USDC_MINT, TOKEN_PROGRAM_ID),
        TOKEN_PROGRAM_ID,
    ]


def test_migrate_and_create_pool_account_orders() -> None:
    metas = ix.migrate_accounts(MINT, USER)
    keys = [m.pubkey for m in metas]
    assert len(metas) == 24
    pool_authority = pda.pool_authority_pda(MINT)
    pool = pda.pool_pda(0, pool_authority, MINT, WSOL_MINT)
    assert keys[8] == PUMP_AMM_PROGRAM_ID and keys[9] == pool and keys[10] == pool_authority
    assert keys[14] == WSOL_MINT and keys[15] == pda.pool_lp_mint_pda(pool)
    assert len(ix.migrate_accounts(MINT, USER, TOKEN_2022_PROGRAM_ID)) == 25  # + SPL Token for the wSOL side
    amm = ix.create_pool_accounts(0, pool_authority, MINT, WSOL_MINT, TOKEN_PROGRAM_ID)
    assert len(amm) == 18
    assert amm[0].pubkey == pool and amm[2].pubkey == pool_authority and amm[2].is_signer
    assert amm[16].pubkey == pda.amm_event_authority_pda() and amm[17].pubkey == PUMP_AMM_PROGRAM_ID


def sample_events() -> list[Event]:
    return [
        CreateEvent(
            "Moon Cat",
            "MCAT",
            "https://x",
            MINT,
            pda.bonding_curve_pda(MINT),
            USER,
            CREATOR,
            1_700_000_000,
            1_073_000_000_000_000,
            30_000_000_000,
            793_100_000_000_000,
            10**15,
            TOKEN_2022_PROGRAM_ID,
            False,
            False,
            USDC_MINT,
            4_000_000_000,
        ),
        TradeEvent(
            MINT,
            10,
            20,
            True,
            USER,
            1_700_000_001,
            1,
            2,
            3,
            4,
            FEE,
            95,
            5,
            CREATOR,
            30,
            6,
            track_volume=True,
            ix_name="buy",
            shareholders=(Shareholder(CREATOR, 10_000),),
            quote_amount=10,
        ),
        CompleteEvent(USER, MINT, pda.bonding_curve_pda(MINT), 1_700_000_002),
        CompletePumpAmmMigrationEvent(USER, MINT, 1, 2, 15_000_001, pda.bonding_curve_pda(MINT), 3, FEE),
        CreatePoolEvent(
            3, 0, CREATOR, MINT, WSOL_MINT, 6, 9, 1, 2, 1, 2, 100, 1_000, 900, 254, FEE, BUYBACK, USER, CREATOR, CREATOR
        ),
    ]


@pytest.mark.parametrize("event", sample_events(), ids=lambda e: type(e).__name__)
def test_events_round_trip_as_emit_cpi_and_program_data(event: Event) -> None:
    payload = encode_event(event)
    cpi = event_cpi_data(event)
    assert cpi[:8] == EVENT_IX_TAG_LE
    assert cpi[8:] == payload
    assert decode_event_cpi(cpi) == event
    line = program_data_log(event)
    assert line == "Program data: " + base64.b64encode(payload).decode()
    assert decode_program_data_log(line) == event
    assert decode_event(payload) == event


def test_trade_event_field_offsets() -> None:
    event = sample_events()[1]
    assert isinstance(event, TradeEvent)
    payload = encode_event(event)
    assert payload[8:40] == bytes(MINT)
    assert struct.unpack_from("<QQ?", payload, 40) == (10, 20, True)  # sol_amount, token_amount, is_buy
    assert payload[57:89] == bytes(USER)


def test_a_trade_event_of_the_creator_fee_era_still_decodes() -> None:
    """Events end earlier on older mainnet data: the decoder fills the later fields with defaults."""
    payload = encode_event(sample_events()[1])
    old = payload[: 8 + 32 + 8 + 8 + 1 + 32 + 8 + 4 * 8 + 32 + 8 + 8 + 32 + 8 + 8]
    decoded = decode_event(old)
    assert isinstance(decoded, TradeEvent)
    assert (decoded.sol_amount, decoded.creator_fee, decoded.ix_name) == (10, 6, "")
    assert decoded.quote_mint == Pubkey.default()
