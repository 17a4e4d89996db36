"""The Associated Token Account program's `Create` and `CreateIdempotent`: the account at the derived address,
rent-exempt, owned by the mint's token program (165 bytes on SPL Token; 170 on Token-2022: the base layout, the
account type and the ImmutableOwner extension), paid by the payer; a wrapped-SOL account counts the lamports it
already holds above rent as its amount.

Source: solana-program-library `associated-token-account/program/src/processor.rs` (the address check, the
idempotent early return, `AssociatedTokenAccountError::InvalidOwner` = custom error 0) and the System program's
`AccountAlreadyInUse` (custom error 0) for `Create` over an existing account. A Token-2022 mint with extensions
that add to its accounts' size (transfer fees, hooks, non-transferable...) is not emulated: pump mints carry only
MetadataPointer and TokenMetadata.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Final

from solders.account import Account
from solders.pubkey import Pubkey

from devnode.pump_exec.context import Failed, Ix, Scratch, custom
from devnode.pump_exec.errors import unsupported
from devnode.pump_exec.system import transfer_lamports
from devnode.tokens import NATIVE_MINT, TOKEN_PROGRAMS, decode_mint, decode_token_account
from pumpfun import cpi, pda, spl
from pumpfun.ids import ASSOCIATED_TOKEN_PROGRAM_ID, SYSTEM_PROGRAM_ID, TOKEN_2022_PROGRAM_ID
from pumpfun.trace import Call

__all__ = ["associated_token_account", "create_associated_account"]

_RENT_EPOCH_EXEMPT: Final = 2**64 - 1
_EXISTING_UNITS: Final = 4_300
#: Token-2022 mint extensions that add nothing to an account's size (MetadataPointer, TokenMetadata).
_SIZE_NEUTRAL_MINT_EXTENSIONS: Final = frozenset({spl.EXT_METADATA_POINTER, spl.EXT_TOKEN_METADATA})


def _mint_extension_types(tlv: bytes) -> list[int]:
    types, offset = [], 0
    while offset + 4 <= len(tlv):
        ext_type, length = struct.unpack_from("<HH", tlv, offset)
        if ext_type == 0:  # zero padding after the last entry
            break
        types.append(ext_type)
        offset += 4 + length
    return types


def _account_space(scratch: Scratch, mint: Pubkey, token_program: Pubkey) -> int:
    """The size of a token account for `mint` (the token program's `GetAccountDataSize`)."""
    mint_account = scratch.get(mint)
    if mint_account is None or mint_account.owner != token_program:
        raise Failed("IncorrectProgramId")
    state = decode_mint(mint_account)
    if state is None:
        raise Failed("InvalidAccountData")
    if token_program != TOKEN_2022_PROGRAM_ID:
        return spl.TOKEN_ACCOUNT_SIZE
    if set(_mint_extension_types(state.extensions)) - _SIZE_NEUTRAL_MINT_EXTENSIONS:
        raise unsupported("an associated token account for a Token-2022 mint with size-changing extensions")
    return spl.TOKEN_2022_ACCOUNT_SIZE


def _existing(scratch: Scratch, ata: Pubkey, owner: Pubkey, mint: Pubkey, program: Pubkey, idempotent: bool) -> bool:
    """True when `ata` already is the right account and the instruction is idempotent; fails when it is in use."""
    account = scratch.get(ata)
    if account is None or (account.owner == SYSTEM_PROGRAM_ID and not bytes(account.data)):
        return False  # absent, or only pre-funded: created below
    if idempotent and account.owner == program:
        state = decode_token_account(account)
        if state is not None and state.owner == owner and state.mint == mint:
            return True
        raise Failed(
            custom(0), ["Program log: Error: Associated token account owner does not match address derivation"]
        )
    raise Failed(custom(0), [f"Create Account: account Address {{ address: {ata}, base: None }} already in use"])


def _create(
    scratch: Scratch, payer: Pubkey, signed: bool, ata: Pubkey, owner: Pubkey, mint: Pubkey, program: Pubkey, space: int
) -> None:
    rent = spl.rent_exempt_minimum(space)
    held = scratch.lamports(ata)
    transfer_lamports(scratch, payer, ata, max(0, rent - held), signed=signed)
    lamports = max(rent, held)
    native = rent if mint == NATIVE_MINT else None
    state = spl.TokenAccountState(mint, owner, lamports - rent if native is not None else 0, native)
    data = spl.pack_token_account_2022(state) if program == TOKEN_2022_PROGRAM_ID else spl.pack_token_account(state)
    scratch.put(ata, Account(lamports, data, program, False, _RENT_EPOCH_EXEMPT))


def associated_token_account(scratch: Scratch, ix: Ix, now: int) -> Call:
    """`Create` (data empty or 0) or `CreateIdempotent` (1) of the associated token account."""
    if ix.data not in (b"", b"\x00", b"\x01"):
        raise unsupported("this Associated Token Account instruction (only Create and CreateIdempotent)")
    idempotent = ix.data == b"\x01"
    log = "Program log: CreateIdempotent" if idempotent else "Program log: Create"
    if len(ix.accounts) < 6:
        raise Failed("NotEnoughAccountKeys")
    payer, ata, owner, mint, system_program, token_program = (m.pubkey for m in ix.accounts[:6])
    try:
        if token_program not in TOKEN_PROGRAMS or system_program != SYSTEM_PROGRAM_ID:
            raise Failed("IncorrectProgramId")
        if ata != pda.associated_token_address(owner, mint, token_program):
            raise Failed("InvalidSeeds", ["Program log: Error: Associated address does not match seed derivation"])
        if _existing(scratch, ata, owner, mint, token_program, idempotent):
            return Call(ASSOCIATED_TOKEN_PROGRAM_ID, ix.keys, ix.data, units=_EXISTING_UNITS, body=[log])
        space = _account_space(scratch, mint, token_program)
        _create(scratch, payer, ix.accounts[0].signer, ata, owner, mint, token_program, space)
    except Failed as failure:
        raise Failed(failure.err, [log, *failure.logs]) from failure
    return cpi.ata_create(payer, ata, owner, mint, token_program, idempotent=idempotent, space=space)


def create_associated_account(
    scratch: Scratch, payer: Pubkey, owner: Pubkey, mint: Pubkey, program: Pubkey
) -> tuple[Call, Callable[[], None]]:
    """A program's CPI creating `owner`'s associated token account for `mint` (an `init_if_needed`), paid by
    `payer` (who signed the transaction): its rendering, and its effect to apply when the CPI runs."""
    ata = pda.associated_token_address(owner, mint, program)
    space = _account_space(scratch, mint, program)
    call = cpi.ata_create(payer, ata, owner, mint, program, idempotent=False, space=space)
    return call, lambda: _create(scratch, payer, True, ata, owner, mint, program, space)
