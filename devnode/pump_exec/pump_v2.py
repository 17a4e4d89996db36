"""The pump program's unified v2 trades (`buy_v2`, `sell_v2`, `buy_exact_quote_in_v2`) and the budget buy on the
legacy accounts (`buy_exact_sol_in`), executed with the program's checks and errors.

The account tables, args and discriminators are `pumpfun.instructions_v2`'s (pump-fun/pump-public-docs
`docs/instructions/BUY.md`, `SELL.md`, `idl/pump.json`); the budget buy's arithmetic is `pumpfun.exact_in`'s.

Order, as for the legacy trades (`pump`): the `Instruction: <Name>` log line, the data
(`InstructionDidNotDeserialize`), Anchor's account passes (types in position order: enough keys, Global and
BondingCurve owned by pump with their discriminators, the mints and the base token accounts owned by a token
program, the user a signer, the program accounts; then `mut` and every seeded address, the quote mint's
associated accounts derived from the instruction's own quote mint and quote token program, the creator vault
from the curve's creator, and each mint owned by the token program named for it), then the program's checks:
Global initialized, the quote mint the curve's (wrapped SOL for a SOL coin), the user's quote account the
canonical associated one on a token quote, the fee recipient one of the Global's (`NotAuthorized`), the buyback
fee recipient one of the Global's, the curve not complete, a non-zero amount, the curve's tokens enough
(`NotEnoughTokensToBuy`), the slippage bound.

Effects. On a SOL coin they are the legacy trade's: lamports between the user, the curve, the fee recipient and
the creator vault. On a coin with a quote mint every quote movement is a token transfer of that mint: a buy pays
the curve's quote account, the fee recipient's and the creator vault's associated quote accounts from the
user's; a sell pays the user and the two fee accounts out of the curve's quote account, the curve signing. The
fee recipient's and the creator vault's quote accounts are created first when missing, paid by the user (the
tables' "ATA rent if missing"). Wrapped SOL is such a quote mint too: its token amounts move with their lamports.

Assumptions where the docs are silent: a wrong quote mint or user quote account fails as `ConstraintSeeds`; a
budget buy below its `min_tokens_out` fails as `TooMuchSolRequired` (the buy's slippage error); the volume
accumulators and their quote accounts are not created (as for the legacy trades), nor is the buyback fee paid
(`Global.buyback_basis_points` is 0 on the devnode); the associated quote accounts of a SOL coin are checked for
their address only, never created or used.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Final

from solders.account import Account
from solders.pubkey import Pubkey

from devnode.pump_exec.anchor import anchor_failure
from devnode.pump_exec.ata import create_associated_account
from devnode.pump_exec.context import Failed, Ix, Meta, Scratch
from devnode.pump_exec.pump import buy_effects, program_checks, pump, run_cpis, write_curve
from devnode.pump_exec.pump_accounts import check_trade_accounts
from devnode.pump_exec.system import transfer_lamports
from devnode.pump_exec.token import move_tokens, token_account
from devnode.tokens import TOKEN_PROGRAMS, decode_mint, decode_token_account
from pumpfun import cpi, pda
from pumpfun._borsh import BorshError
from pumpfun.accounts import (
    BONDING_CURVE_DISCRIMINATOR,
    GLOBAL_DISCRIMINATOR,
    TOKEN_DECIMALS,
    BondingCurve,
    Global,
    decode_bonding_curve,
    decode_global,
)
from pumpfun.curve import BuyQuote, SellQuote, buy_quote, sell_quote
from pumpfun.errors import AnchorError, PumpError
from pumpfun.events import CompleteEvent, Event
from pumpfun.exact_in import exact_in_quote
from pumpfun.fees import buyback_fee_recipients, fee_rates, fee_recipients
from pumpfun.ids import (
    ASSOCIATED_TOKEN_PROGRAM_ID,
    FEE_PROGRAM_ID,
    PUMP_PROGRAM_ID,
    SYSTEM_PROGRAM_ID,
    TOKEN_2022_PROGRAM_ID,
)
from pumpfun.instructions import BUY_EXACT_SOL_IN_DISCRIMINATOR
from pumpfun.instructions_v2 import (
    BUY_EXACT_QUOTE_IN_V2_DISCRIMINATOR,
    BUY_V2_ACCOUNT_NAMES,
    BUY_V2_DISCRIMINATOR,
    SELL_V2_ACCOUNT_NAMES,
    SELL_V2_DISCRIMINATOR,
    BuyExactQuoteInV2Args,
    BuyExactSolInArgs,
    BuyV2Args,
    QuoteSide,
    SellV2Args,
    decode_budget_or_v2,
    quote_side,
    trade_v2_accounts,
)
from pumpfun.trace import Call
from pumpfun.trades import TradeParties, trade_event, trade_top_call

__all__ = ["pump_any"]

_V2_BUY_UNITS: Final = 41_000
_V2_SELL_UNITS: Final = 36_000
_EXACT_SOL_IN_UNITS: Final = 35_000
_PROGRAM_CHECK_UNITS: Final = 15_000
_NAMES: Final = {
    BUY_V2_DISCRIMINATOR: "BuyV2",
    SELL_V2_DISCRIMINATOR: "SellV2",
    BUY_EXACT_QUOTE_IN_V2_DISCRIMINATOR: "BuyExactQuoteInV2",
    BUY_EXACT_SOL_IN_DISCRIMINATOR: "BuyExactSolIn",
}
_IX_NAMES: Final = {
    BUY_V2_DISCRIMINATOR: "buy_v2",
    SELL_V2_DISCRIMINATOR: "sell_v2",
    BUY_EXACT_QUOTE_IN_V2_DISCRIMINATOR: "buy_exact_quote_in_v2",
    BUY_EXACT_SOL_IN_DISCRIMINATOR: "buy_exact_sol_in",
}
_PROGRAMS: Final[dict[str, frozenset[Pubkey]]] = {
    "base_token_program": TOKEN_PROGRAMS,
    "quote_token_program": TOKEN_PROGRAMS,
    "associated_token_program": frozenset({ASSOCIATED_TOKEN_PROGRAM_ID}),
    "fee_program": frozenset({FEE_PROGRAM_ID}),
    "system_program": frozenset({SYSTEM_PROGRAM_ID}),
    "program": frozenset({PUMP_PROGRAM_ID}),
}
_SEEDED: Final = frozenset(
    {
        "global",
        "associated_quote_fee_recipient",
        "associated_quote_buyback_fee_recipient",
        "bonding_curve",
        "associated_base_bonding_curve",
        "associated_quote_bonding_curve",
        "creator_vault",
        "associated_creator_vault",
        "sharing_config",
        "global_volume_accumulator",
        "user_volume_accumulator",
        "associated_user_volume_accumulator",
        "fee_config",
        "event_authority",
    }
)


@dataclass(frozen=True)
class _V2:
    """A v2 trade's accounts once checked."""

    global_: Global
    curve: BondingCurve
    key: dict[str, Pubkey]
    quote: QuoteSide

    @property
    def token_quoted(self) -> bool:
        return not self.curve.is_sol_quoted

    def parties(self) -> TradeParties:
        k = self.key
        return TradeParties(
            mint=k["base_mint"],
            token_program=k["base_token_program"],
            bonding_curve=k["bonding_curve"],
            associated_bonding_curve=k["associated_base_bonding_curve"],
            user=k["user"],
            user_token_account=k["associated_base_user"],
            fee_recipient=k["fee_recipient"],
            creator_vault=k["creator_vault"],
        )


def _pump_owned(scratch: Scratch, meta: Meta, name: str, disc: bytes) -> bytes:
    account = scratch.get(meta.pubkey)
    if account is None:
        raise anchor_failure(AnchorError.AccountNotInitialized, name)
    if account.owner != PUMP_PROGRAM_ID:
        raise anchor_failure(AnchorError.AccountOwnedByWrongProgram, name, (account.owner, PUMP_PROGRAM_ID))
    data = bytes(account.data)
    if data[:8] != disc:
        raise anchor_failure(AnchorError.AccountDiscriminatorMismatch, name)
    return data


def _token_owned(scratch: Scratch, meta: Meta, name: str, *, is_mint: bool) -> Account:
    account = scratch.get(meta.pubkey)
    if account is None:
        raise anchor_failure(AnchorError.AccountNotInitialized, name)
    if account.owner not in TOKEN_PROGRAMS:
        raise anchor_failure(AnchorError.AccountOwnedByWrongProgram, name)
    if (decode_mint(account) if is_mint else decode_token_account(account)) is None:
        raise anchor_failure(AnchorError.AccountNotInitialized, name)
    return account


def _check_accounts(scratch: Scratch, ix: Ix, is_buy: bool) -> _V2:
    names = BUY_V2_ACCOUNT_NAMES if is_buy else SELL_V2_ACCOUNT_NAMES
    if len(ix.accounts) < len(names):
        raise anchor_failure(AnchorError.AccountNotEnoughKeys)
    metas = dict(zip(names, ix.accounts, strict=False))
    # Anchor's first pass: each account's type, in position order.
    owners: dict[str, Pubkey] = {}
    global_: Global | None = None
    curve: BondingCurve | None = None
    for name, meta in metas.items():
        if name == "global":
            global_ = decode_global(_pump_owned(scratch, meta, name, GLOBAL_DISCRIMINATOR))
        elif name == "bonding_curve":
            curve = decode_bonding_curve(_pump_owned(scratch, meta, name, BONDING_CURVE_DISCRIMINATOR))
        elif name in ("base_mint", "quote_mint"):
            owners[name] = _token_owned(scratch, meta, name, is_mint=True).owner
        elif name in ("associated_base_bonding_curve", "associated_base_user"):
            _token_owned(scratch, meta, name, is_mint=False)
        elif name == "user" and not meta.signer:
            raise anchor_failure(AnchorError.AccountNotSigner, name)
        elif name in _PROGRAMS and meta.pubkey not in _PROGRAMS[name]:
            raise anchor_failure(AnchorError.InvalidProgramId, name)
    assert global_ is not None and curve is not None  # both tables name them
    # The second pass: `mut`, the seeds, each mint's token program.
    key = {name: meta.pubkey for name, meta in metas.items()}
    quote = QuoteSide(key["quote_mint"], key["quote_token_program"])
    reference = trade_v2_accounts(
        key["base_mint"],
        key["user"],
        curve.creator,
        key["fee_recipient"],
        key["buyback_fee_recipient"],
        quote,
        key["base_token_program"],
        is_buy=is_buy,
    )
    for (name, meta), expected in zip(metas.items(), reference, strict=True):
        if expected.is_writable and not meta.writable:
            raise anchor_failure(AnchorError.ConstraintMut, name)
        if name in _SEEDED and meta.pubkey != expected.pubkey:
            raise anchor_failure(AnchorError.ConstraintSeeds, name, (meta.pubkey, expected.pubkey))
        mint_of = {"base_mint": "base_token_program", "quote_mint": "quote_token_program"}.get(name)
        if mint_of is not None and owners[name] != key[mint_of]:
            raise anchor_failure(AnchorError.AccountOwnedByWrongProgram, name, (owners[name], key[mint_of]))
    return _V2(global_, curve, key, quote)


def _program_checks(v2: _V2) -> None:
    g, curve, key = v2.global_, v2.curve, v2.key
    if not g.initialized:
        raise anchor_failure(PumpError.NotInitialized)
    expected = quote_side(curve.quote_mint).mint
    if key["quote_mint"] != expected:
        raise anchor_failure(AnchorError.ConstraintSeeds, "quote_mint", (key["quote_mint"], expected))
    user_quote = v2.quote.ata(key["user"])
    if v2.token_quoted and key["associated_quote_user"] != user_quote:
        raise anchor_failure(
            AnchorError.ConstraintSeeds, "associated_quote_user", (key["associated_quote_user"], user_quote)
        )
    if key["fee_recipient"] not in fee_recipients(g, curve):
        raise anchor_failure(PumpError.NotAuthorized)
    if key["buyback_fee_recipient"] not in buyback_fee_recipients(g):
        raise anchor_failure(PumpError.BuybackFeeRecipientNotAuthorized)
    if curve.complete:
        raise anchor_failure(PumpError.BondingCurveComplete)


def _decimals(scratch: Scratch, mint: Pubkey) -> int:
    state = decode_mint(scratch.get(mint))
    assert state is not None  # checked as the instruction's mint
    return state.decimals


def _quote_transfers(
    scratch: Scratch,
    call: Call,
    v2: _V2,
    source: Pubkey,
    authority: Pubkey,
    transfers: tuple[tuple[Pubkey, int], ...],
) -> list[Callable[[], None]]:
    """The quote token's transfers of a quote-mint trade (the curve's share and the two fees), each a CPI
    of the token program and its effect: from the user's quote account on a buy, the curve's on a sell."""
    qtp, qmint = v2.quote.token_program, v2.quote.mint
    decimals = _decimals(scratch, qmint)
    checked = (qmint, decimals) if qtp == TOKEN_2022_PROGRAM_ID else (None, None)
    effects: list[Callable[[], None]] = []
    for destination, amount in transfers:
        call.cpi(cpi.token_transfer(qtp, source, qmint, destination, authority, amount, decimals))
        effects.append(
            partial(
                move_tokens,
                scratch,
                qtp,
                source,
                destination,
                authority,
                amount,
                signed=True,
                mint=checked[0],
                decimals=checked[1],
            )
        )
    return effects


def _fee_accounts(scratch: Scratch, v2: _V2) -> list[tuple[Call, Callable[[], None]]]:
    """The fee recipient's and the creator vault's quote accounts, created when missing (paid by the user)."""
    k, out = v2.key, []
    for owner, ata in (
        (k["fee_recipient"], k["associated_quote_fee_recipient"]),
        (k["creator_vault"], k["associated_creator_vault"]),
    ):
        if scratch.get(ata) is None:
            out.append(create_associated_account(scratch, k["user"], owner, v2.quote.mint, v2.quote.token_program))
    return out


def _event(v2: _V2, after: BondingCurve, quote: BuyQuote | SellQuote, is_buy: bool, now: int, name: str) -> Event:
    event = trade_event(
        v2.parties(),
        after,
        is_buy=is_buy,
        sol_amount=quote.sol_amount,
        token_amount=quote.token_amount,
        rates=fee_rates(v2.global_, v2.curve),
        protocol_fee=quote.protocol_fee,
        creator_fee=quote.creator_fee,
        track_volume=is_buy,
        current_sol_volume=quote.sol_amount if is_buy else 0,
        now=now,
    )
    return replace(event, ix_name=name)


def _base_checks(v2: _V2) -> tuple[Pubkey | None, int | None]:
    """The mint and decimals of the base token CPI: TransferChecked on Token-2022, Transfer on SPL Token."""
    if v2.key["base_token_program"] == TOKEN_2022_PROGRAM_ID:
        return v2.key["base_mint"], TOKEN_DECIMALS
    return None, None


def _buy(scratch: Scratch, ix: Ix, now: int, v2: _V2, quote: BuyQuote, name: str) -> Call:
    k, p = v2.key, v2.parties()
    after = v2.curve.with_reserves(quote.after, complete=quote.completes)
    events: list[Event] = [_event(v2, after, quote, True, now, name)]
    if quote.completes:
        events.append(CompleteEvent(p.user, p.mint, p.bonding_curve, now, after.quote_mint))
    call = trade_top_call(ix.instruction(), _V2_BUY_UNITS, _NAMES[ix.data[:8]])
    base_mint, base_decimals = _base_checks(v2)
    base_tp = k["base_token_program"]
    call.cpi(
        cpi.token_transfer(
            base_tp,
            p.associated_bonding_curve,
            p.mint,
            p.user_token_account,
            p.bonding_curve,
            quote.token_amount,
            TOKEN_DECIMALS,
        )
    )
    effects: list[Callable[[], None]] = [
        lambda: move_tokens(
            scratch,
            base_tp,
            p.associated_bonding_curve,
            p.user_token_account,
            p.bonding_curve,
            quote.token_amount,
            signed=True,
            mint=base_mint,
            decimals=base_decimals,
        )
    ]
    if v2.token_quoted:
        for create_call, create in _fee_accounts(scratch, v2):
            call.cpi(create_call)
            effects.append(create)
        effects += _quote_transfers(
            scratch,
            call,
            v2,
            k["associated_quote_user"],
            p.user,
            (
                (k["associated_quote_bonding_curve"], quote.sol_amount),
                (k["associated_quote_fee_recipient"], quote.protocol_fee),
                (k["associated_creator_vault"], quote.creator_fee),
            ),
        )
    else:
        scratch.waive_rent_rule(p.fee_recipient, p.creator_vault)
        for destination, amount in (
            (p.bonding_curve, quote.sol_amount),
            (p.fee_recipient, quote.protocol_fee),
            (p.creator_vault, quote.creator_fee),
        ):
            call.cpi(cpi.system_transfer(p.user, destination, amount))
            effects.append(partial(transfer_lamports, scratch, p.user, destination, amount, signed=True))
    for event in events:
        cpi.emit_event(call, PUMP_PROGRAM_ID, pda.event_authority_pda(), event)
    run_cpis(call, effects)
    write_curve(scratch, p.bonding_curve, after)
    return call


def _sell(scratch: Scratch, ix: Ix, now: int, v2: _V2, args: SellV2Args) -> Call:
    k, p, curve = v2.key, v2.parties(), v2.curve
    if args.amount == 0:
        raise anchor_failure(PumpError.SellZeroAmount)
    if token_account(scratch, p.user_token_account, p.token_program).amount < args.amount:
        raise anchor_failure(PumpError.NotEnoughTokensToSell)
    quote = sell_quote(curve.reserves, args.amount, fee_rates(v2.global_, curve))
    if quote.sol_amount > curve.real_sol_reserves or quote.sol_out < 0:
        raise anchor_failure(PumpError.Overflow)
    if quote.sol_out < args.min_sol_output:
        raise anchor_failure(PumpError.TooLittleSolReceived)
    after = curve.with_reserves(quote.after)
    call = trade_top_call(ix.instruction(), _V2_SELL_UNITS, "SellV2")
    base_mint, base_decimals = _base_checks(v2)
    base_tp = k["base_token_program"]
    call.cpi(
        cpi.token_transfer(
            base_tp, p.user_token_account, p.mint, p.associated_bonding_curve, p.user, args.amount, TOKEN_DECIMALS
        )
    )
    effects: list[Callable[[], None]] = [
        lambda: move_tokens(
            scratch,
            base_tp,
            p.user_token_account,
            p.associated_bonding_curve,
            p.user,
            args.amount,
            signed=True,
            mint=base_mint,
            decimals=base_decimals,
        )
    ]
    if v2.token_quoted:
        for create_call, create in _fee_accounts(scratch, v2):
            call.cpi(create_call)
            effects.append(create)
        effects += _quote_transfers(
            scratch,
            call,
            v2,
            k["associated_quote_bonding_curve"],
            p.bonding_curve,
            (
                (k["associated_quote_user"], quote.sol_out),
                (k["associated_quote_fee_recipient"], quote.protocol_fee),
                (k["associated_creator_vault"], quote.creator_fee),
            ),
        )
    cpi.emit_event(call, PUMP_PROGRAM_ID, pda.event_authority_pda(), _event(v2, after, quote, False, now, "sell_v2"))
    run_cpis(call, effects)
    if not v2.token_quoted:  # the program owns the curve and pays out of its lamports directly
        scratch.waive_rent_rule(p.fee_recipient, p.creator_vault)
        scratch.set_lamports(p.bonding_curve, scratch.lamports(p.bonding_curve) - quote.sol_amount)
        for recipient, lamports in (
            (p.user, quote.sol_out),
            (p.fee_recipient, quote.protocol_fee),
            (p.creator_vault, quote.creator_fee),
        ):
            scratch.set_lamports(recipient, scratch.lamports(recipient) + lamports)
    write_curve(scratch, p.bonding_curve, after)
    return call


def _budget_quote(curve: BondingCurve, g: Global, spendable: int, min_tokens_out: int) -> BuyQuote:
    """The budget buy's checks: it buys something, no more than the curve holds, at least `min_tokens_out`."""
    if spendable == 0:
        raise anchor_failure(PumpError.BuyZeroAmount)
    quote = exact_in_quote(curve.reserves, spendable, fee_rates(g, curve))
    if quote.token_amount == 0 or quote.token_amount > curve.real_token_reserves:
        raise anchor_failure(PumpError.NotEnoughTokensToBuy)
    if quote.token_amount < min_tokens_out:
        raise anchor_failure(PumpError.TooMuchSolRequired)
    return quote


def _v2_buy_quote(v2: _V2, args: BuyV2Args) -> BuyQuote:
    if args.amount == 0:
        raise anchor_failure(PumpError.BuyZeroAmount)
    if args.amount > v2.curve.real_token_reserves:
        raise anchor_failure(PumpError.NotEnoughTokensToBuy)
    quote = buy_quote(v2.curve.reserves, args.amount, fee_rates(v2.global_, v2.curve))
    if quote.total_cost > args.max_sol_cost:
        raise anchor_failure(PumpError.TooMuchSolRequired)
    return quote


def _run(scratch: Scratch, ix: Ix, now: int) -> Call:
    disc = ix.data[:8]
    try:
        args = decode_budget_or_v2(ix.data)
    except (BorshError, ValueError):
        raise anchor_failure(AnchorError.InstructionDidNotDeserialize) from None
    if isinstance(args, BuyExactSolInArgs):  # the legacy buy's accounts and effects
        accounts = check_trade_accounts(scratch, ix, is_buy=True)
        program_checks(accounts)
        quote = _budget_quote(accounts.curve, accounts.global_, args.spendable_sol_in, args.min_tokens_out)
        return buy_effects(
            scratch, ix, now, accounts, quote, args.track_volume, "buy_exact_sol_in", units=_EXACT_SOL_IN_UNITS
        )
    v2 = _check_accounts(scratch, ix, is_buy=not isinstance(args, SellV2Args))
    _program_checks(v2)
    if isinstance(args, SellV2Args):
        return _sell(scratch, ix, now, v2, args)
    if isinstance(args, BuyExactQuoteInV2Args):
        quote = _budget_quote(v2.curve, v2.global_, args.spendable_quote_in, args.min_tokens_out)
    else:
        quote = _v2_buy_quote(v2, args)
    return _buy(scratch, ix, now, v2, quote, _IX_NAMES[disc])


def pump_any(scratch: Scratch, ix: Ix, now: int) -> Call:
    """A top-level pump instruction: the v2 trades and `buy_exact_sol_in` here, the legacy ones in `pump`."""
    disc = ix.data[:8]
    if disc not in _NAMES:
        return pump(scratch, ix, now)
    try:
        return _run(scratch, ix, now)
    except Failed as failure:
        if failure.call is not None:
            raise
        head = f"Program log: Instruction: {_NAMES[disc]}"
        raise Failed(failure.err, [head, *failure.logs], units=_PROGRAM_CHECK_UNITS) from failure
