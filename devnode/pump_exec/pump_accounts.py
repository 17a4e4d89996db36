"""The account checks of a legacy pump `buy` / `sell`, made as Anchor makes them before the program's own code
runs: first each account's type, in position order (enough keys, the Global and BondingCurve accounts owned by
pump with their discriminators, the mint and token accounts owned by a token program, the user a signer, the
program accounts the right programs), then each account's constraints, in position order (writable where the IDL
says `mut`, every PDA at its derived address: global, bonding curve, associated bonding curve, creator vault from
the curve's creator, event authority, volume accumulators, fee config).

The expected accounts are `pumpfun.instructions.buy_accounts` / `sell_accounts` for the instruction's own mint,
user, fee recipients and token program with the curve's creator: what a client builds is what is checked. The
fee recipients, `bonding_curve_v2` and the buyback recipient are checked by the program's code (`pump.py`).
Assumptions where the IDL (pump-fun/pump-public-docs `idl/pump.json`) does not say how an account is typed:
`associated_user` must be an initialized token account (its mint and owner are the token transfer's checks) and
a wrong `program` / `fee_program` fails as `InvalidProgramId`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, TypeVar

from solders.account import Account
from solders.pubkey import Pubkey

from devnode.pump_exec.anchor import anchor_failure
from devnode.pump_exec.context import Ix, Meta, Scratch
from devnode.tokens import TOKEN_PROGRAMS, decode_token_account
from pumpfun._borsh import BorshError
from pumpfun.accounts import (
    BONDING_CURVE_DISCRIMINATOR,
    GLOBAL_DISCRIMINATOR,
    BondingCurve,
    Global,
    decode_bonding_curve,
    decode_global,
)
from pumpfun.errors import AnchorError
from pumpfun.ids import FEE_PROGRAM_ID, PUMP_PROGRAM_ID, SYSTEM_PROGRAM_ID
from pumpfun.instructions import BUY_ACCOUNT_NAMES, SELL_ACCOUNT_NAMES, buy_accounts, sell_accounts
from pumpfun.trades import TradeParties

__all__ = ["TradeAccounts", "check_trade_accounts"]

T = TypeVar("T")

#: The accounts of the IDL (the rest are remaining accounts the program reads itself).
_IDL_ACCOUNTS: Final = {True: 16, False: 14}
_PROGRAMS: Final[dict[str, frozenset[Pubkey]]] = {
    "system_program": frozenset({SYSTEM_PROGRAM_ID}),
    "token_program": TOKEN_PROGRAMS,
    "program": frozenset({PUMP_PROGRAM_ID}),
    "fee_program": frozenset({FEE_PROGRAM_ID}),
}
_SEEDED: Final = frozenset(
    {
        "global",
        "bonding_curve",
        "associated_bonding_curve",
        "creator_vault",
        "event_authority",
        "global_volume_accumulator",
        "user_volume_accumulator",
        "fee_config",
    }
)


@dataclass(frozen=True)
class TradeAccounts:
    """A buy's or sell's accounts once checked: the Global and curve they name, who trades with whom, and the
    accounts after the IDL's (`bonding_curve_v2`, the buyback fee recipient), as many as were given."""

    global_: Global
    curve: BondingCurve
    parties: TradeParties
    remaining: tuple[Meta, ...]


def _program_account(scratch: Scratch, meta: Meta, name: str, disc: bytes, decode: Callable[[bytes], T]) -> T:
    account = scratch.get(meta.pubkey)
    if account is None:
        raise anchor_failure(AnchorError.AccountNotInitialized, name)
    if account.owner != PUMP_PROGRAM_ID:
        raise anchor_failure(AnchorError.AccountOwnedByWrongProgram, name, (account.owner, PUMP_PROGRAM_ID))
    try:
        if bytes(account.data)[:8] != disc:
            raise BorshError("discriminator")
        return decode(bytes(account.data))
    except BorshError:
        raise anchor_failure(AnchorError.AccountDiscriminatorMismatch, name) from None


def _token_owned(scratch: Scratch, meta: Meta, name: str, is_mint: bool) -> Account:
    account = scratch.get(meta.pubkey)
    if account is None:
        raise anchor_failure(AnchorError.AccountNotInitialized, name)
    if account.owner not in TOKEN_PROGRAMS:
        raise anchor_failure(AnchorError.AccountOwnedByWrongProgram, name)
    if not is_mint and decode_token_account(account) is None:
        raise anchor_failure(AnchorError.AccountNotInitialized, name)
    return account


def _check_types(scratch: Scratch, metas: dict[str, Meta]) -> tuple[Global, BondingCurve, Account]:
    """Anchor's first pass, in position order. Returns the Global, the curve and the mint account."""
    global_: Global | None = None
    curve: BondingCurve | None = None
    mint: Account | None = None
    for name, meta in metas.items():
        if name == "global":
            global_ = _program_account(scratch, meta, name, GLOBAL_DISCRIMINATOR, decode_global)
        elif name == "bonding_curve":
            curve = _program_account(scratch, meta, name, BONDING_CURVE_DISCRIMINATOR, decode_bonding_curve)
        elif name == "mint":
            mint = _token_owned(scratch, meta, name, is_mint=True)
        elif name in ("associated_bonding_curve", "associated_user"):
            _token_owned(scratch, meta, name, is_mint=False)
        elif name == "user" and not meta.signer:
            raise anchor_failure(AnchorError.AccountNotSigner, name)
        elif name in _PROGRAMS and meta.pubkey not in _PROGRAMS[name]:
            raise anchor_failure(AnchorError.InvalidProgramId, name)
    assert global_ is not None and curve is not None and mint is not None  # every IDL list names all three
    return global_, curve, mint


def _check_constraints(metas: dict[str, Meta], curve: BondingCurve, mint: Account, is_buy: bool) -> None:
    """Anchor's second pass, in position order: `mut`, the PDAs, the mint's token program."""
    key = {name: meta.pubkey for name, meta in metas.items()}
    token_program = key["token_program"]
    build = buy_accounts if is_buy else sell_accounts
    # The fee and buyback recipients are the program's checks: the reference takes the instruction's own.
    reference = build(key["mint"], key["user"], curve.creator, key["fee_recipient"], Pubkey.default(), token_program)
    for (name, meta), expected in zip(metas.items(), reference, strict=False):
        if expected.is_writable and not meta.writable:
            raise anchor_failure(AnchorError.ConstraintMut, name)
        if name in _SEEDED and meta.pubkey != expected.pubkey:
            raise anchor_failure(AnchorError.ConstraintSeeds, name, (meta.pubkey, expected.pubkey))
        if name == "mint" and mint.owner != token_program:
            raise anchor_failure(AnchorError.AccountOwnedByWrongProgram, name, (mint.owner, token_program))


def check_trade_accounts(scratch: Scratch, ix: Ix, is_buy: bool) -> TradeAccounts:
    """The accounts of a buy (`is_buy`) or sell instruction, checked; raises the Anchor error of the first
    account that fails."""
    count = _IDL_ACCOUNTS[is_buy]
    if len(ix.accounts) < count:
        raise anchor_failure(AnchorError.AccountNotEnoughKeys)
    names = BUY_ACCOUNT_NAMES if is_buy else SELL_ACCOUNT_NAMES
    metas = {name: ix.accounts[i] for i, name in enumerate(names[:count])}
    global_, curve, mint = _check_types(scratch, metas)
    _check_constraints(metas, curve, mint, is_buy)
    m = {name: meta.pubkey for name, meta in metas.items()}
    parties = TradeParties(
        mint=m["mint"],
        token_program=m["token_program"],
        bonding_curve=m["bonding_curve"],
        associated_bonding_curve=m["associated_bonding_curve"],
        user=m["user"],
        user_token_account=m["associated_user"],
        fee_recipient=m["fee_recipient"],
        creator_vault=m["creator_vault"],
    )
    return TradeAccounts(global_, curve, parties, tuple(ix.accounts[count:]))
