"""pumpfun.wsol: the wrapped-SOL instructions around a trade are byte for byte what solana-py's SPL Token and
System builders make (an independent implementation of the same layouts)."""

from __future__ import annotations

from solders.keypair import Keypair
from solders.system_program import TransferParams, transfer
from spl.token.constants import TOKEN_PROGRAM_ID, WRAPPED_SOL_MINT
from spl.token.instructions import (
    close_account,
    create_idempotent_associated_token_account,
    get_associated_token_address,
    sync_native,
)
from spl.token.models import CloseAccountParams, SyncNativeParams

from pumpfun import wsol
from pumpfun.ids import WSOL_MINT

OWNER = Keypair.from_seed(bytes([5] * 32)).pubkey()


def test_the_wsol_account_is_the_owners_ata_of_the_native_mint() -> None:
    assert WSOL_MINT == WRAPPED_SOL_MINT
    assert wsol.wsol_account(OWNER) == get_associated_token_address(OWNER, WRAPPED_SOL_MINT)


def test_wrap_and_unwrap_match_solana_py() -> None:
    account = wsol.wsol_account(OWNER)
    assert wsol.wrap_sol_instructions(OWNER, 1_234_567) == [
        create_idempotent_associated_token_account(OWNER, OWNER, WRAPPED_SOL_MINT),
        transfer(TransferParams(from_pubkey=OWNER, to_pubkey=account, lamports=1_234_567)),
        sync_native(SyncNativeParams(program_id=TOKEN_PROGRAM_ID, account=account)),
    ]
    assert wsol.unwrap_sol_instruction(OWNER) == close_account(
        CloseAccountParams(program_id=TOKEN_PROGRAM_ID, account=account, dest=OWNER, owner=OWNER)
    )
    assert wsol.wrap_sol_instructions(OWNER, 0) == [
        create_idempotent_associated_token_account(OWNER, OWNER, WRAPPED_SOL_MINT)
    ]
