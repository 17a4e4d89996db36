"""Wrapped SOL around a trade on a wrapped-SOL-quoted curve: fund and sync the user's wSOL account before
the buy, close it after to unwrap what is left.

The instructions of SPL Token's native mint (solana-program-library `token/program/src/instruction.rs`:
`SyncNative` is 17, `CloseAccount` is 9) and the System program's `Transfer` (2), packed by hand like the
rest of this package. The wSOL account is the user's associated token account for
`So11111111111111111111111111111111111111112` under SPL Token (the native mint is an SPL Token mint).
"""

from __future__ import annotations

from typing import Final

from solders.instruction import AccountMeta, Instruction
from solders.pubkey import Pubkey

from pumpfun import pda, spl
from pumpfun.ids import SYSTEM_PROGRAM_ID, TOKEN_PROGRAM_ID, WSOL_MINT
from pumpfun.instructions import associated_token_account_instruction

__all__ = [
    "CLOSE_ACCOUNT_TAG",
    "close_account_instruction",
    "sync_native_instruction",
    "system_transfer_instruction",
    "unwrap_sol_instruction",
    "wrap_sol_instructions",
    "wsol_account",
]

#: SPL Token `CloseAccount`: its data is this one byte.
CLOSE_ACCOUNT_TAG: Final = 9


def wsol_account(owner: Pubkey) -> Pubkey:
    """The owner's wrapped-SOL associated token account."""
    return pda.associated_token_address(owner, WSOL_MINT, TOKEN_PROGRAM_ID)


def system_transfer_instruction(source: Pubkey, destination: Pubkey, lamports: int) -> Instruction:
    """System `Transfer`: `source` (signer) pays `lamports` to `destination`."""
    metas = [AccountMeta(source, is_signer=True, is_writable=True), AccountMeta(destination, False, True)]
    return Instruction(SYSTEM_PROGRAM_ID, spl.system_transfer_data(lamports), metas)


def sync_native_instruction(account: Pubkey) -> Instruction:
    """SPL Token `SyncNative`: a native account's token amount follows its lamports above rent."""
    return Instruction(TOKEN_PROGRAM_ID, spl.token_sync_native_data(), [AccountMeta(account, False, True)])


def close_account_instruction(
    account: Pubkey, destination: Pubkey, owner: Pubkey, token_program: Pubkey = TOKEN_PROGRAM_ID
) -> Instruction:
    """SPL Token `CloseAccount`: all of `account`'s lamports (a native account's wrapped SOL included) go to
    `destination`; `owner` signs."""
    metas = [
        AccountMeta(account, False, True),
        AccountMeta(destination, False, True),
        AccountMeta(owner, is_signer=True, is_writable=False),
    ]
    return Instruction(token_program, bytes([CLOSE_ACCOUNT_TAG]), metas)


def wrap_sol_instructions(owner: Pubkey, lamports: int) -> list[Instruction]:
    """Create the owner's wSOL account if missing (idempotent), move `lamports` into it, sync it."""
    account = wsol_account(owner)
    instructions = [associated_token_account_instruction(owner, owner, WSOL_MINT, TOKEN_PROGRAM_ID)]
    if lamports > 0:
        instructions.append(system_transfer_instruction(owner, account, lamports))
        instructions.append(sync_native_instruction(account))
    return instructions


def unwrap_sol_instruction(owner: Pubkey) -> Instruction:
    """Close the owner's wSOL account into the owner: what the trade left in it comes back as SOL."""
    return close_account_instruction(wsol_account(owner), owner, owner)
