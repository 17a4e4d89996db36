"""What a trade builder reads besides the curve math: the named account positions of a legacy buy and sell,
the buyer's associated token account instruction, a curve's token program, and the error codes a failed
buy or sell comes back with (pumpfun.instructions, pumpfun.accounts, pumpfun.errors)."""

from __future__ import annotations

import pytest
from solders.keypair import Keypair
from solders.pubkey import Pubkey
from solders.token.associated import get_associated_token_address

from pumpfun import pda
from pumpfun.accounts import token_program_of_mint
from pumpfun.errors import AnchorError, PumpError, error_message, error_name
from pumpfun.ids import (
    ASSOCIATED_TOKEN_PROGRAM_ID,
    BUYBACK_FEE_RECIPIENTS,
    FEE_RECIPIENTS,
    SYSTEM_PROGRAM_ID,
    TOKEN_2022_PROGRAM_ID,
    TOKEN_PROGRAM_ID,
)
from pumpfun.instructions import (
    BUY_ACCOUNT_NAMES,
    SELL_ACCOUNT_NAMES,
    BuyArgs,
    SellArgs,
    associated_token_account_instruction,
    buy_instruction,
    sell_instruction,
)

MINT = Keypair.from_seed(bytes([1] * 32)).pubkey()
USER = Keypair.from_seed(bytes([2] * 32)).pubkey()
CREATOR = Keypair.from_seed(bytes([3] * 32)).pubkey()


@pytest.mark.parametrize("program", [TOKEN_PROGRAM_ID, TOKEN_2022_PROGRAM_ID])
def test_the_account_names_label_every_position_of_a_buy_and_a_sell(program: Pubkey) -> None:
    fee_recipient, buyback = FEE_RECIPIENTS[3], BUYBACK_FEE_RECIPIENTS[5]
    buy = buy_instruction(MINT, USER, CREATOR, fee_recipient, buyback, BuyArgs(1, 2), program)
    sell = sell_instruction(MINT, USER, CREATOR, fee_recipient, buyback, SellArgs(1, 0), program)
    expected = {
        "fee_recipient": fee_recipient,
        "mint": MINT,
        "bonding_curve": pda.bonding_curve_pda(MINT),
        "associated_bonding_curve": pda.associated_bonding_curve_pda(MINT, program),
        "associated_user": pda.associated_token_address(USER, MINT, program),
        "user": USER,
        "token_program": program,
        "creator_vault": pda.creator_vault_pda(CREATOR),
        "bonding_curve_v2": pda.bonding_curve_v2_pda(MINT),
        "buyback_fee_recipient": buyback,
        "global": pda.global_pda(),
        "system_program": SYSTEM_PROGRAM_ID,
    }
    for ix, names, size in ((buy, BUY_ACCOUNT_NAMES, 18), (sell, SELL_ACCOUNT_NAMES, 16)):
        assert len(names) == len(set(names)) == len(ix.accounts) == size
        by_name = {name: meta.pubkey for name, meta in zip(names, ix.accounts, strict=True)}
        assert {name: by_name[name] for name in expected} == expected
        assert ix.accounts[names.index("user")].is_signer
        assert ix.accounts[names.index("buyback_fee_recipient")].is_writable
    assert SELL_ACCOUNT_NAMES.index("creator_vault") < SELL_ACCOUNT_NAMES.index("token_program")
    assert BUY_ACCOUNT_NAMES.index("token_program") < BUY_ACCOUNT_NAMES.index("creator_vault")


@pytest.mark.parametrize("program", [TOKEN_PROGRAM_ID, TOKEN_2022_PROGRAM_ID])
def test_the_associated_token_account_instruction(program: Pubkey) -> None:
    ix = associated_token_account_instruction(USER, USER, MINT, program)
    assert ix.program_id == ASSOCIATED_TOKEN_PROGRAM_ID
    assert bytes(ix.data) == bytes([1])  # CreateIdempotent
    assert [m.pubkey for m in ix.accounts] == [
        USER,
        get_associated_token_address(USER, MINT, program),
        USER,
        MINT,
        SYSTEM_PROGRAM_ID,
        program,
    ]
    assert [(m.is_signer, m.is_writable) for m in ix.accounts[:3]] == [(True, True), (False, True), (False, False)]
    assert bytes(associated_token_account_instruction(USER, CREATOR, MINT, idempotent=False).data) == bytes([0])


def test_a_curve_trades_through_its_mints_owner() -> None:
    assert token_program_of_mint(TOKEN_PROGRAM_ID) == TOKEN_PROGRAM_ID
    assert token_program_of_mint(TOKEN_2022_PROGRAM_ID) == TOKEN_2022_PROGRAM_ID
    with pytest.raises(ValueError, match="SPL Token or Token-2022"):
        token_program_of_mint(SYSTEM_PROGRAM_ID)


def test_error_codes_map_back_to_their_names_and_messages() -> None:
    assert error_name(6002) == "TooMuchSolRequired"
    assert error_name(6003) == "TooLittleSolReceived"
    assert error_name(6005) == "BondingCurveComplete"
    assert error_name(6021) == "NotEnoughTokensToBuy"
    assert error_name(3012) == "AccountNotInitialized"
    assert error_name(6001) is None and error_name(0) is None
    assert error_message(6002) == "slippage: Too much SOL required to buy the given amount of tokens."
    assert error_message(2006) == "A seeds constraint was violated"
    assert error_message(0x1869F) == "custom program error: 0x1869f"


def test_every_known_code_has_a_message_and_the_tables_do_not_overlap() -> None:
    assert not {int(e) for e in PumpError} & {int(e) for e in AnchorError}
    assert all(6000 <= e < 7000 for e in PumpError) and all(100 <= e < 4000 for e in AnchorError)
    for code in [*PumpError, *AnchorError]:
        assert error_name(int(code)) == code.name
        assert error_message(int(code)) and not error_message(int(code)).startswith("custom program error")
