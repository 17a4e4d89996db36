"""The unified v2 trades (`buy_v2`, `sell_v2`, `buy_exact_quote_in_v2`) and the budget form of the legacy buy
(`buy_exact_sol_in`): instruction data and account lists.

Sources: pump-fun/pump-public-docs `docs/instructions/BUY.md` and `SELL.md` (the v2 account tables: 27 accounts
for a buy, 26 for a sell, every one mandatory) and `idl/pump.json` (discriminators, args, which accounts are
writable, `buy_exact_sol_in`'s quote formulas). A v2 trade names the quote side explicitly: the quote mint and
its token program, and the quote mint's associated token accounts of the fee recipient, the buyback fee
recipient, the bonding curve, the user, the creator vault and the user's volume accumulator. A SOL-paired coin
(`BondingCurve.quote_mint` the default key) passes wrapped SOL under SPL Token as its quote and moves native SOL;
a coin with a quote mint moves that token.

Args: `buy_v2 (amount, max_sol_cost)`, `sell_v2 (amount, min_sol_output)`, `buy_exact_quote_in_v2
(spendable_quote_in, min_tokens_out)`; the IDL appends an optional `partial_fill` (OptionBool) to both buys,
which the encoders leave off (the docs allow it: it may be left off the end) and the decoder accepts.
`buy_exact_sol_in (spendable_sol_in, min_tokens_out, track_volume)` takes the legacy `buy`'s accounts
(`pumpfun.instructions.buy_accounts`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from solders.instruction import AccountMeta, Instruction
from solders.pubkey import Pubkey

from pumpfun import pda
from pumpfun._borsh import BorshError, Reader, Writer
from pumpfun.ids import (
    ASSOCIATED_TOKEN_PROGRAM_ID,
    FEE_PROGRAM_ID,
    PUMP_PROGRAM_ID,
    SYSTEM_PROGRAM_ID,
    TOKEN_PROGRAM_ID,
    WSOL_MINT,
)
from pumpfun.instructions import BUY_EXACT_SOL_IN_DISCRIMINATOR, buy_accounts

__all__ = [
    "BUY_EXACT_QUOTE_IN_V2_DISCRIMINATOR",
    "BUY_V2_ACCOUNT_NAMES",
    "BUY_V2_DISCRIMINATOR",
    "SELL_V2_ACCOUNT_NAMES",
    "SELL_V2_DISCRIMINATOR",
    "BuyExactQuoteInV2Args",
    "BuyExactSolInArgs",
    "BuyV2Args",
    "QuoteSide",
    "SellV2Args",
    "TradeV2Args",
    "buy_exact_quote_in_v2_instruction",
    "buy_exact_sol_in_instruction",
    "buy_v2_instruction",
    "decode_budget_or_v2",
    "encode_buy_exact_quote_in_v2",
    "encode_buy_exact_sol_in",
    "encode_buy_v2",
    "encode_sell_v2",
    "quote_side",
    "sell_v2_instruction",
    "trade_v2_accounts",
]

BUY_V2_DISCRIMINATOR: Final = bytes([184, 23, 238, 97, 103, 197, 211, 61])
SELL_V2_DISCRIMINATOR: Final = bytes([93, 246, 130, 60, 231, 233, 64, 178])
BUY_EXACT_QUOTE_IN_V2_DISCRIMINATOR: Final = bytes([194, 171, 28, 70, 104, 77, 91, 47])

_HEAD: Final = (
    "global", "base_mint", "quote_mint", "base_token_program", "quote_token_program", "associated_token_program",
    "fee_recipient", "associated_quote_fee_recipient", "buyback_fee_recipient",
    "associated_quote_buyback_fee_recipient", "bonding_curve", "associated_base_bonding_curve",
    "associated_quote_bonding_curve", "user", "associated_base_user", "associated_quote_user", "creator_vault",
    "associated_creator_vault", "sharing_config",
)  # fmt: skip
_TAIL: Final = (
    "user_volume_accumulator", "associated_user_volume_accumulator", "fee_config", "fee_program", "system_program",
    "event_authority", "program",
)  # fmt: skip
#: `buy_v2` / `buy_exact_quote_in_v2` accounts by position (BUY.md): 27.
BUY_V2_ACCOUNT_NAMES: Final = (*_HEAD, "global_volume_accumulator", *_TAIL)
#: `sell_v2` accounts by position (SELL.md): 26, no global volume accumulator.
SELL_V2_ACCOUNT_NAMES: Final = (*_HEAD, *_TAIL)


@dataclass(frozen=True)
class BuyV2Args:
    amount: int  # base tokens out, base units
    max_sol_cost: int  # quote base units (lamports on a SOL or wSOL quote), fees included


@dataclass(frozen=True)
class SellV2Args:
    amount: int  # base tokens in
    min_sol_output: int  # quote base units after fees


@dataclass(frozen=True)
class BuyExactQuoteInV2Args:
    spendable_quote_in: int  # the quote to spend, fees included
    min_tokens_out: int


@dataclass(frozen=True)
class BuyExactSolInArgs:
    spendable_sol_in: int  # lamports to spend, fees included
    min_tokens_out: int
    track_volume: bool = True  # OptionBool


TradeV2Args = BuyV2Args | SellV2Args | BuyExactQuoteInV2Args


@dataclass(frozen=True)
class QuoteSide:
    """The quote a v2 trade names: a mint and its token program (wrapped SOL under SPL Token for a SOL coin)."""

    mint: Pubkey
    token_program: Pubkey = TOKEN_PROGRAM_ID

    def ata(self, owner: Pubkey) -> Pubkey:
        return pda.associated_token_address(owner, self.mint, self.token_program)


def quote_side(curve_quote_mint: Pubkey, quote_token_program: Pubkey = TOKEN_PROGRAM_ID) -> QuoteSide:
    """The quote of a curve with `BondingCurve.quote_mint` `curve_quote_mint`: wrapped SOL for a SOL coin."""
    return QuoteSide(WSOL_MINT if curve_quote_mint == Pubkey.default() else curve_quote_mint, quote_token_program)


def encode_buy_v2(args: BuyV2Args) -> bytes:
    return Writer(BUY_V2_DISCRIMINATOR).u64(args.amount).u64(args.max_sol_cost).bytes()


def encode_sell_v2(args: SellV2Args) -> bytes:
    return Writer(SELL_V2_DISCRIMINATOR).u64(args.amount).u64(args.min_sol_output).bytes()


def encode_buy_exact_quote_in_v2(args: BuyExactQuoteInV2Args) -> bytes:
    return Writer(BUY_EXACT_QUOTE_IN_V2_DISCRIMINATOR).u64(args.spendable_quote_in).u64(args.min_tokens_out).bytes()


def encode_buy_exact_sol_in(args: BuyExactSolInArgs) -> bytes:
    w = Writer(BUY_EXACT_SOL_IN_DISCRIMINATOR).u64(args.spendable_sol_in).u64(args.min_tokens_out)
    return w.bool(args.track_volume).bytes()


def decode_budget_or_v2(data: bytes) -> TradeV2Args | BuyExactSolInArgs:
    """Decode `buy_v2`, `sell_v2`, `buy_exact_quote_in_v2` or `buy_exact_sol_in` data (trailing OptionBools may be
    left off; a `partial_fill` is read and ignored)."""
    disc, r = data[:8], Reader(data, 8)
    if disc == BUY_V2_DISCRIMINATOR:
        return BuyV2Args(r.u64(), r.u64())
    if disc == SELL_V2_DISCRIMINATOR:
        return SellV2Args(r.u64(), r.u64())
    if disc == BUY_EXACT_QUOTE_IN_V2_DISCRIMINATOR:
        return BuyExactQuoteInV2Args(r.u64(), r.u64())
    if disc == BUY_EXACT_SOL_IN_DISCRIMINATOR:
        spendable, min_out = r.u64(), r.u64()
        return BuyExactSolInArgs(spendable, min_out, r.bool() if not r.at_end() else False)
    raise BorshError(f"not a v2 or exact-in pump trade: {list(disc)}")


def _ro(pubkey: Pubkey) -> AccountMeta:
    return AccountMeta(pubkey, is_signer=False, is_writable=False)


def _w(pubkey: Pubkey) -> AccountMeta:
    return AccountMeta(pubkey, is_signer=False, is_writable=True)


def trade_v2_accounts(
    mint: Pubkey,
    user: Pubkey,
    creator: Pubkey,
    fee_recipient: Pubkey,
    buyback_fee_recipient: Pubkey,
    quote: QuoteSide,
    base_token_program: Pubkey,
    *,
    is_buy: bool,
) -> list[AccountMeta]:
    """The accounts of `buy_v2` / `buy_exact_quote_in_v2` (`is_buy`, 27) or `sell_v2` (26), in the tables' order."""
    curve = pda.bonding_curve_pda(mint)
    vault = pda.creator_vault_pda(creator)
    volume = pda.user_volume_accumulator_pda(user)
    head = [
        _ro(pda.global_pda()),
        _ro(mint),
        _ro(quote.mint),
        _ro(base_token_program),
        _ro(quote.token_program),
        _ro(ASSOCIATED_TOKEN_PROGRAM_ID),
        _w(fee_recipient),
        _w(quote.ata(fee_recipient)),
        _w(buyback_fee_recipient),
        _w(quote.ata(buyback_fee_recipient)),
        _w(curve),
        _w(pda.associated_token_address(curve, mint, base_token_program)),
        _w(quote.ata(curve)),
        AccountMeta(user, is_signer=True, is_writable=True),
        _w(pda.associated_token_address(user, mint, base_token_program)),
        _w(quote.ata(user)),
        _w(vault),
        _w(quote.ata(vault)),
        _ro(pda.sharing_config_pda(mint)),
    ]
    middle = [_ro(pda.global_volume_accumulator_pda())] if is_buy else []
    tail = [
        _w(volume),
        _w(quote.ata(volume)),
        _ro(pda.fee_config_pda()),
        _ro(FEE_PROGRAM_ID),
        _ro(SYSTEM_PROGRAM_ID),
        _ro(pda.event_authority_pda()),
        _ro(PUMP_PROGRAM_ID),
    ]
    return head + middle + tail


def buy_v2_instruction(
    mint: Pubkey,
    user: Pubkey,
    creator: Pubkey,
    fee_recipient: Pubkey,
    buyback_fee_recipient: Pubkey,
    quote: QuoteSide,
    base_token_program: Pubkey,
    args: BuyV2Args,
) -> Instruction:
    metas = trade_v2_accounts(
        mint, user, creator, fee_recipient, buyback_fee_recipient, quote, base_token_program, is_buy=True
    )
    return Instruction(PUMP_PROGRAM_ID, encode_buy_v2(args), metas)


def buy_exact_quote_in_v2_instruction(
    mint: Pubkey,
    user: Pubkey,
    creator: Pubkey,
    fee_recipient: Pubkey,
    buyback_fee_recipient: Pubkey,
    quote: QuoteSide,
    base_token_program: Pubkey,
    args: BuyExactQuoteInV2Args,
) -> Instruction:
    metas = trade_v2_accounts(
        mint, user, creator, fee_recipient, buyback_fee_recipient, quote, base_token_program, is_buy=True
    )
    return Instruction(PUMP_PROGRAM_ID, encode_buy_exact_quote_in_v2(args), metas)


def sell_v2_instruction(
    mint: Pubkey,
    user: Pubkey,
    creator: Pubkey,
    fee_recipient: Pubkey,
    buyback_fee_recipient: Pubkey,
    quote: QuoteSide,
    base_token_program: Pubkey,
    args: SellV2Args,
) -> Instruction:
    metas = trade_v2_accounts(
        mint, user, creator, fee_recipient, buyback_fee_recipient, quote, base_token_program, is_buy=False
    )
    return Instruction(PUMP_PROGRAM_ID, encode_sell_v2(args), metas)


def buy_exact_sol_in_instruction(
    mint: Pubkey,
    user: Pubkey,
    creator: Pubkey,
    fee_recipient: Pubkey,
    buyback_fee_recipient: Pubkey,
    args: BuyExactSolInArgs,
    token_program: Pubkey = TOKEN_PROGRAM_ID,
) -> Instruction:
    """`buy_exact_sol_in`: the legacy `buy`'s 18 accounts (`buy_accounts`), the budget's data."""
    metas = buy_accounts(mint, user, creator, fee_recipient, buyback_fee_recipient, token_program)
    return Instruction(PUMP_PROGRAM_ID, encode_buy_exact_sol_in(args), metas)
