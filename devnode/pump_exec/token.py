"""SPL Token / Token-2022 instructions a pump transaction uses around a trade: `Transfer`, `TransferChecked`,
`SyncNative` and `CloseAccount`, with the token program's checks, error codes and log lines; and the token
movement a pump trade makes by CPI (`move_tokens`).

Token accounts are changed in place (the `amount` at offset 64 of the 165-byte base layout), so extensions,
delegates and close authorities stay as they are. Not emulated: delegates (only the owner may move or close an
account), multisig owners and the Token-2022 extensions that change a transfer (fees, hooks, confidential
transfers), which pump mints do not carry.
Source: solana-program-library `token/program/src/processor.rs` (`process_transfer`, `process_sync_native`,
`process_close_account`) and its instruction layouts (Transfer 3, CloseAccount 9, TransferChecked 12,
SyncNative 17).
"""

from __future__ import annotations

import struct
from typing import Final

from solders.account import Account
from solders.pubkey import Pubkey

from devnode.pump_exec.context import Failed, Ix, Meta, Scratch, account_with
from devnode.pump_exec.errors import TokenError, token_failure, unsupported
from devnode.tokens import TOKEN_PROGRAMS, TokenAccountState, decode_mint, decode_token_account
from pumpfun.ids import TOKEN_2022_PROGRAM_ID
from pumpfun.trace import Call

__all__ = ["move_tokens", "token", "token_account"]

_TRANSFER: Final = 3
_CLOSE_ACCOUNT: Final = 9
_TRANSFER_CHECKED: Final = 12
_SYNC_NATIVE: Final = 17
_NAMES: Final = {
    _TRANSFER: "Transfer",
    _CLOSE_ACCOUNT: "CloseAccount",
    _TRANSFER_CHECKED: "TransferChecked",
    _SYNC_NATIVE: "SyncNative",
}
#: Typical compute units of each instruction on SPL Token (Token-2022's are lower for a transfer).
_UNITS: Final = {_TRANSFER: 4_645, _CLOSE_ACCOUNT: 2_916, _TRANSFER_CHECKED: 6_200, _SYNC_NATIVE: 3_045}
_AMOUNT_OFFSET: Final = 64
_FROZEN: Final = 2


def token_account(scratch: Scratch, key: Pubkey, program: Pubkey) -> TokenAccountState:
    """The initialized token account at `key`, owned by `program` (the token program's own checks)."""
    account = scratch.get(key)
    if account is None or account.owner != program:
        raise Failed("IncorrectProgramId" if account is not None else "UninitializedAccount")
    state = decode_token_account(account)
    if state is None:
        raise Failed("UninitializedAccount")
    return state


def _with_amount(account: Account, amount: int, lamports: int | None = None) -> Account:
    data = bytearray(bytes(account.data))
    struct.pack_into("<Q", data, _AMOUNT_OFFSET, amount)
    return account_with(account, lamports=lamports, data=bytes(data))


def move_tokens(
    scratch: Scratch,
    program: Pubkey,
    source: Pubkey,
    destination: Pubkey,
    authority: Pubkey,
    amount: int,
    *,
    signed: bool,
    mint: Pubkey | None = None,
    decimals: int | None = None,
) -> None:
    """`Transfer` (or `TransferChecked` when `mint` and `decimals` are given): checks, then the amounts move (and,
    between wrapped-SOL accounts, the lamports with them)."""
    src = token_account(scratch, source, program)
    dst = token_account(scratch, destination, program)
    if src.state == _FROZEN or dst.state == _FROZEN:
        raise token_failure(TokenError.AccountFrozen)
    if src.mint != dst.mint:
        raise token_failure(TokenError.MintMismatch)
    if mint is not None:
        mint_state = decode_mint(scratch.get(mint))
        if src.mint != mint or mint_state is None:
            raise token_failure(TokenError.MintMismatch)
        if decimals is not None and mint_state.decimals != decimals:
            raise token_failure(TokenError.MintDecimalsMismatch)
    if authority != src.owner:
        raise token_failure(TokenError.OwnerMismatch)
    if not signed:
        raise Failed("MissingRequiredSignature")
    if amount > src.amount:
        raise token_failure(TokenError.InsufficientFunds)
    if source == destination:
        return
    src_account, dst_account = scratch.get(source), scratch.get(destination)
    assert src_account is not None and dst_account is not None  # token_account checked both
    native = src.is_native is not None
    scratch.put(
        source, _with_amount(src_account, src.amount - amount, src_account.lamports - amount if native else None)
    )
    scratch.put(
        destination, _with_amount(dst_account, dst.amount + amount, dst_account.lamports + amount if native else None)
    )


def _account(ix: Ix, i: int) -> Meta:
    if i >= len(ix.accounts):
        raise Failed("NotEnoughAccountKeys")
    return ix.accounts[i]


def _transfer(scratch: Scratch, ix: Ix, checked: bool) -> None:
    size = 10 if checked else 9
    if len(ix.data) != size:
        raise Failed("InvalidInstructionData")
    amount = struct.unpack_from("<Q", ix.data, 1)[0]
    if checked:
        source, mint, destination, authority = (_account(ix, i) for i in range(4))
        move_tokens(
            scratch,
            ix.program,
            source.pubkey,
            destination.pubkey,
            authority.pubkey,
            amount,
            signed=authority.signer,
            mint=mint.pubkey,
            decimals=ix.data[9],
        )
    else:
        source, destination, authority = (_account(ix, i) for i in range(3))
        move_tokens(
            scratch, ix.program, source.pubkey, destination.pubkey, authority.pubkey, amount, signed=authority.signer
        )


def _sync_native(scratch: Scratch, ix: Ix) -> None:
    key = _account(ix, 0).pubkey
    state = token_account(scratch, key, ix.program)
    if state.is_native is None:
        raise token_failure(TokenError.NonNativeNotSupported)
    account = scratch.get(key)
    assert account is not None
    scratch.put(key, _with_amount(account, account.lamports - state.is_native))


def _close_account(scratch: Scratch, ix: Ix) -> None:
    key, destination, authority = (_account(ix, i) for i in range(3))
    state = token_account(scratch, key.pubkey, ix.program)
    if key.pubkey == destination.pubkey:
        raise Failed("InvalidAccountData")
    if state.is_native is None and state.amount != 0:
        raise token_failure(TokenError.NonNativeHasBalance)
    if authority.pubkey not in (state.owner, state.close_authority):
        raise token_failure(TokenError.OwnerMismatch)
    if not authority.signer:
        raise Failed("MissingRequiredSignature")
    scratch.move_lamports(key.pubkey, destination.pubkey, scratch.lamports(key.pubkey))  # no lamports: closed


def token(scratch: Scratch, ix: Ix, now: int) -> Call:
    """A top-level SPL Token / Token-2022 instruction (one of the four above)."""
    assert ix.program in TOKEN_PROGRAMS
    tag = ix.data[0] if ix.data else None
    if tag not in _NAMES:
        raise unsupported(f"this {'Token-2022' if ix.program == TOKEN_2022_PROGRAM_ID else 'SPL Token'} instruction")
    name = _NAMES[tag]
    log = f"Program log: Instruction: {name}"
    try:
        if tag in (_TRANSFER, _TRANSFER_CHECKED):
            _transfer(scratch, ix, checked=tag == _TRANSFER_CHECKED)
        elif tag == _SYNC_NATIVE:
            _sync_native(scratch, ix)
        else:
            _close_account(scratch, ix)
    except Failed as failure:
        raise Failed(failure.err, [log, *failure.logs]) from failure
    return Call(ix.program, ix.keys, ix.data, units=_UNITS[tag], body=[log])
