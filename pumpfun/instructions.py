"""Instruction data (Anchor discriminator + Borsh args) and account lists for pump `create`,
`create_v2`, `buy`, `sell`, `migrate` and PumpSwap `create_pool`, in the account order of
pump-fun/pump-public-docs (idl/pump.json, idl/pump_amm.json).

A client's buy or sell is `buy_instruction` / `sell_instruction` (legacy instructions: the IDL's 16 / 14
accounts, then the remaining accounts `bonding_curve_v2` and a buyback fee recipient that the 2026
upgrades require, docs/BREAKING_FEE_RECIPIENT.md), usually after `associated_token_account_instruction`
for the buyer's token account. `BUY_ACCOUNT_NAMES` / `SELL_ACCOUNT_NAMES` name each position. The
reference lists `buy`'s args as `amount, max_sol_cost, track_volume`; a later IDL appends an optional
`partial_fill` (OptionBool), which the decoder accepts and the encoder leaves off.

`migrate` is not in the reference: its discriminator is `sha256("global:migrate")[:8]` and its
24-account order comes from public copies of the pump IDL. On mainnet a completed curve graduates
through `migrate`, which creates the canonical PumpSwap pool by CPI to `create_pool` with
`pool_authority` as the pool creator.

An Anchor instruction discriminator is `sha256("global:<snake_case_name>")[:8]`; the arrays below
are the ones in `idl/pump.json` / `idl/pump_amm.json` (the tests check that both agree).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Final

from solders.instruction import AccountMeta, Instruction
from solders.pubkey import Pubkey

from pumpfun import pda
from pumpfun._borsh import BorshError, Reader, Writer
from pumpfun.ids import (
    ASSOCIATED_TOKEN_PROGRAM_ID,
    FEE_PROGRAM_ID,
    MAYHEM_PROGRAM_ID,
    MPL_TOKEN_METADATA_PROGRAM_ID,
    PUMP_AMM_PROGRAM_ID,
    PUMP_PROGRAM_ID,
    RENT_SYSVAR_ID,
    SYSTEM_PROGRAM_ID,
    TOKEN_2022_PROGRAM_ID,
    TOKEN_PROGRAM_ID,
    WSOL_MINT,
)

__all__ = [
    "BUY_ACCOUNT_NAMES",
    "BUY_DISCRIMINATOR",
    "BUY_EXACT_SOL_IN_DISCRIMINATOR",
    "CREATE_DISCRIMINATOR",
    "CREATE_POOL_DISCRIMINATOR",
    "CREATE_V2_DISCRIMINATOR",
    "MIGRATE_DISCRIMINATOR",
    "SELL_ACCOUNT_NAMES",
    "SELL_DISCRIMINATOR",
    "WITHDRAW_AUTHORITY",
    "BuyArgs",
    "CreateArgs",
    "CreatePoolArgs",
    "CreateV2Args",
    "QuoteAccounts",
    "SellArgs",
    "associated_token_account_instruction",
    "buy_accounts",
    "buy_instruction",
    "create_accounts",
    "create_instruction",
    "create_pool_accounts",
    "create_pool_instruction",
    "create_v2_accounts",
    "create_v2_instruction",
    "decode_amm_instruction",
    "decode_pump_instruction",
    "encode_buy",
    "encode_create",
    "encode_create_pool",
    "encode_create_v2",
    "encode_sell",
    "instruction_discriminator",
    "migrate_accounts",
    "migrate_instruction",
    "sell_accounts",
    "sell_instruction",
]


def instruction_discriminator(name: str) -> bytes:
    """Anchor instruction discriminator: `sha256("global:<name>")[:8]`."""
    return hashlib.sha256(f"global:{name}".encode()).digest()[:8]


CREATE_DISCRIMINATOR: Final = bytes([24, 30, 200, 40, 5, 28, 7, 119])
CREATE_V2_DISCRIMINATOR: Final = bytes([214, 144, 76, 236, 95, 139, 49, 180])
BUY_DISCRIMINATOR: Final = bytes([102, 6, 61, 18, 1, 218, 235, 234])
BUY_EXACT_SOL_IN_DISCRIMINATOR: Final = bytes([56, 252, 116, 8, 158, 223, 205, 95])
SELL_DISCRIMINATOR: Final = bytes([51, 230, 133, 164, 1, 127, 131, 173])
CREATE_POOL_DISCRIMINATOR: Final = bytes([233, 146, 209, 142, 207, 104, 64, 188])
MIGRATE_DISCRIMINATOR: Final = bytes([155, 234, 231, 146, 236, 158, 162, 30])

#: The accounts of a legacy `buy` by position: the 16 of the IDL, then the 2 remaining accounts.
BUY_ACCOUNT_NAMES: Final = (
    "global", "fee_recipient", "mint", "bonding_curve", "associated_bonding_curve", "associated_user", "user",
    "system_program", "token_program", "creator_vault", "event_authority", "program",
    "global_volume_accumulator", "user_volume_accumulator", "fee_config", "fee_program",
    "bonding_curve_v2", "buyback_fee_recipient",
)  # fmt: skip
#: The accounts of a legacy `sell` by position: the 14 of the IDL (creator_vault before token_program), then 2.
SELL_ACCOUNT_NAMES: Final = (
    "global", "fee_recipient", "mint", "bonding_curve", "associated_bonding_curve", "associated_user", "user",
    "system_program", "creator_vault", "token_program", "event_authority", "program", "fee_config", "fee_program",
    "bonding_curve_v2", "buyback_fee_recipient",
)  # fmt: skip

#: `Global.withdraw_authority` in the documented example Global (docs/PUMP_PROGRAM_README.md).
WITHDRAW_AUTHORITY: Final = Pubkey.from_string("39azUYFWPz3VHgKCf3VChUwbpURdCHRxjWVowf5jUJjg")


# --- args -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CreateArgs:
    name: str
    symbol: str
    uri: str
    creator: Pubkey


@dataclass(frozen=True)
class CreateV2Args:
    name: str
    symbol: str
    uri: str
    creator: Pubkey
    is_mayhem_mode: bool = False
    is_cashback_enabled: bool = False  # OptionBool: a 1-byte bool wrapper


@dataclass(frozen=True)
class BuyArgs:
    amount: int  # tokens out, base units
    max_sol_cost: int  # lamports, fees included
    track_volume: bool = True  # OptionBool


@dataclass(frozen=True)
class SellArgs:
    amount: int  # tokens in, base units
    min_sol_output: int  # lamports after fees


@dataclass(frozen=True)
class CreatePoolArgs:
    index: int  # u16
    base_amount_in: int
    quote_amount_in: int
    coin_creator: Pubkey
    is_mayhem_mode: bool = False
    is_cashback_coin: bool = False  # OptionBool


def encode_create(args: CreateArgs) -> bytes:
    w = Writer(CREATE_DISCRIMINATOR).string(args.name).string(args.symbol).string(args.uri)
    return w.pubkey(args.creator).bytes()


def encode_create_v2(args: CreateV2Args) -> bytes:
    return (
        Writer(CREATE_V2_DISCRIMINATOR)
        .string(args.name)
        .string(args.symbol)
        .string(args.uri)
        .pubkey(args.creator)
        .bool(args.is_mayhem_mode)
        .bool(args.is_cashback_enabled)
        .bytes()
    )


def encode_buy(args: BuyArgs) -> bytes:
    return Writer(BUY_DISCRIMINATOR).u64(args.amount).u64(args.max_sol_cost).bool(args.track_volume).bytes()


def encode_sell(args: SellArgs) -> bytes:
    return Writer(SELL_DISCRIMINATOR).u64(args.amount).u64(args.min_sol_output).bytes()


def encode_create_pool(args: CreatePoolArgs) -> bytes:
    return (
        Writer(CREATE_POOL_DISCRIMINATOR)
        .u16(args.index)
        .u64(args.base_amount_in)
        .u64(args.quote_amount_in)
        .pubkey(args.coin_creator)
        .bool(args.is_mayhem_mode)
        .bool(args.is_cashback_coin)
        .bytes()
    )


def decode_pump_instruction(data: bytes) -> CreateArgs | CreateV2Args | BuyArgs | SellArgs | None:
    """Decode the data of a top-level pump `create`, `create_v2`, `buy` or `sell` instruction
    (`migrate` has no args: `None`)."""
    disc, r = data[:8], Reader(data, 8)
    if disc == MIGRATE_DISCRIMINATOR:
        return None
    if disc == CREATE_DISCRIMINATOR:
        return CreateArgs(r.string(), r.string(), r.string(), r.pubkey())
    if disc == CREATE_V2_DISCRIMINATOR:
        name, symbol, uri, creator = r.string(), r.string(), r.string(), r.pubkey()
        mayhem = r.bool()
        cashback = r.bool() if not r.at_end() else False  # trailing optional args may be left off
        return CreateV2Args(name, symbol, uri, creator, mayhem, cashback)
    if disc == BUY_DISCRIMINATOR:
        amount, max_cost = r.u64(), r.u64()
        return BuyArgs(amount, max_cost, r.bool() if not r.at_end() else False)  # partial_fill, if any, ignored
    if disc == SELL_DISCRIMINATOR:
        return SellArgs(r.u64(), r.u64())
    raise BorshError(f"unknown pump instruction discriminator {list(disc)}")


def decode_amm_instruction(data: bytes) -> CreatePoolArgs:
    """Decode the data of a PumpSwap `create_pool` instruction."""
    if data[:8] != CREATE_POOL_DISCRIMINATOR:
        raise BorshError(f"not a create_pool instruction: {list(data[:8])}")
    r = Reader(data, 8)
    index, base_in, quote_in, coin_creator = r.u16(), r.u64(), r.u64(), r.pubkey()
    mayhem = r.bool()
    cashback = r.bool() if not r.at_end() else False
    return CreatePoolArgs(index, base_in, quote_in, coin_creator, mayhem, cashback)


# --- account lists ----------------------------------------------------------------------------------


def _ro(pubkey: Pubkey) -> AccountMeta:
    return AccountMeta(pubkey, is_signer=False, is_writable=False)


def _w(pubkey: Pubkey) -> AccountMeta:
    return AccountMeta(pubkey, is_signer=False, is_writable=True)


def _ws(pubkey: Pubkey) -> AccountMeta:
    return AccountMeta(pubkey, is_signer=True, is_writable=True)


def create_accounts(mint: Pubkey, user: Pubkey) -> list[AccountMeta]:
    """Legacy `create` (SPL Token mint, Metaplex metadata): 14 accounts."""
    return [
        _ws(mint),
        _ro(pda.mint_authority_pda()),
        _w(pda.bonding_curve_pda(mint)),
        _w(pda.associated_bonding_curve_pda(mint, TOKEN_PROGRAM_ID)),
        _ro(pda.global_pda()),
        _ro(MPL_TOKEN_METADATA_PROGRAM_ID),
        _w(pda.metaplex_metadata_pda(mint)),
        _ws(user),
        _ro(SYSTEM_PROGRAM_ID),
        _ro(TOKEN_PROGRAM_ID),
        _ro(ASSOCIATED_TOKEN_PROGRAM_ID),
        _ro(RENT_SYSVAR_ID),
        _ro(pda.event_authority_pda()),
        _ro(PUMP_PROGRAM_ID),
    ]


@dataclass(frozen=True)
class QuoteAccounts:
    """The optional `create_v2` remaining accounts for a coin quoted in a token other than native SOL."""

    quote_mint: Pubkey
    quote_token_program: Pubkey = TOKEN_PROGRAM_ID

    def associated_quote_bonding_curve(self, mint: Pubkey) -> Pubkey:
        return pda.associated_token_address(pda.bonding_curve_pda(mint), self.quote_mint, self.quote_token_program)


def create_v2_accounts(mint: Pubkey, user: Pubkey, quote: QuoteAccounts | None = None) -> list[AccountMeta]:
    """`create_v2` (Token-2022 mint): 16 accounts, plus 3 remaining accounts for a non-native quote."""
    metas = [
        _ws(mint),
        _ro(pda.mint_authority_pda()),
        _w(pda.bonding_curve_pda(mint)),
        _w(pda.associated_bonding_curve_pda(mint, TOKEN_2022_PROGRAM_ID)),
        _ro(pda.global_pda()),
        _ws(user),
        _ro(SYSTEM_PROGRAM_ID),
        _ro(TOKEN_2022_PROGRAM_ID),
        _ro(ASSOCIATED_TOKEN_PROGRAM_ID),
        _w(MAYHEM_PROGRAM_ID),
        _ro(pda.mayhem_global_params_pda()),
        _w(pda.mayhem_sol_vault_pda()),
        _w(pda.mayhem_state_pda(mint)),
        _w(pda.mayhem_token_vault_pda(mint)),
        _ro(pda.event_authority_pda()),
        _ro(PUMP_PROGRAM_ID),
    ]
    if quote is not None:
        metas += [
            _ro(quote.quote_mint),
            _w(quote.associated_quote_bonding_curve(mint)),
            _ro(quote.quote_token_program),
        ]
    return metas


def buy_accounts(
    mint: Pubkey,
    user: Pubkey,
    creator: Pubkey,
    fee_recipient: Pubkey,
    buyback_fee_recipient: Pubkey,
    token_program: Pubkey = TOKEN_PROGRAM_ID,
) -> list[AccountMeta]:
    """Legacy `buy`: 16 accounts, then `bonding_curve_v2` and a buyback fee recipient (18)."""
    return [
        _ro(pda.global_pda()),
        _w(fee_recipient),
        _ro(mint),
        _w(pda.bonding_curve_pda(mint)),
        _w(pda.associated_bonding_curve_pda(mint, token_program)),
        _w(pda.associated_token_address(user, mint, token_program)),
        _ws(user),
        _ro(SYSTEM_PROGRAM_ID),
        _ro(token_program),
        _w(pda.creator_vault_pda(creator)),
        _ro(pda.event_authority_pda()),
        _ro(PUMP_PROGRAM_ID),
        _ro(pda.global_volume_accumulator_pda()),
        _w(pda.user_volume_accumulator_pda(user)),
        _ro(pda.fee_config_pda()),
        _ro(FEE_PROGRAM_ID),
        _ro(pda.bonding_curve_v2_pda(mint)),
        _w(buyback_fee_recipient),
    ]


def sell_accounts(
    mint: Pubkey,
    user: Pubkey,
    creator: Pubkey,
    fee_recipient: Pubkey,
    buyback_fee_recipient: Pubkey,
    token_program: Pubkey = TOKEN_PROGRAM_ID,
) -> list[AccountMeta]:
    """Legacy `sell`: 14 accounts (creator_vault before token_program), then `bonding_curve_v2` and a
    buyback fee recipient (16)."""
    return [
        _ro(pda.global_pda()),
        _w(fee_recipient),
        _ro(mint),
        _w(pda.bonding_curve_pda(mint)),
        _w(pda.associated_bonding_curve_pda(mint, token_program)),
        _w(pda.associated_token_address(user, mint, token_program)),
        _ws(user),
        _ro(SYSTEM_PROGRAM_ID),
        _w(pda.creator_vault_pda(creator)),
        _ro(token_program),
        _ro(pda.event_authority_pda()),
        _ro(PUMP_PROGRAM_ID),
        _ro(pda.fee_config_pda()),
        _ro(FEE_PROGRAM_ID),
        _ro(pda.bonding_curve_v2_pda(mint)),
        _w(buyback_fee_recipient),
    ]


def create_pool_accounts(
    index: int,
    creator: Pubkey,
    base_mint: Pubkey,
    quote_mint: Pubkey,
    base_token_program: Pubkey,
    quote_token_program: Pubkey = TOKEN_PROGRAM_ID,
) -> list[AccountMeta]:
    """PumpSwap `create_pool`: 18 accounts. The LP mint is a Token-2022 mint."""
    pool = pda.pool_pda(index, creator, base_mint, quote_mint)
    lp_mint = pda.pool_lp_mint_pda(pool)
    return [
        _w(pool),
        _ro(pda.amm_global_config_pda()),
        _ws(creator),
        _ro(base_mint),
        _ro(quote_mint),
        _w(lp_mint),
        _w(pda.associated_token_address(creator, base_mint, base_token_program)),
        _w(pda.associated_token_address(creator, quote_mint, quote_token_program)),
        _w(pda.associated_token_address(creator, lp_mint, TOKEN_2022_PROGRAM_ID)),
        _w(pda.associated_token_address(pool, base_mint, base_token_program)),
        _w(pda.associated_token_address(pool, quote_mint, quote_token_program)),
        _ro(SYSTEM_PROGRAM_ID),
        _ro(TOKEN_2022_PROGRAM_ID),
        _ro(base_token_program),
        _ro(quote_token_program),
        _ro(ASSOCIATED_TOKEN_PROGRAM_ID),
        _ro(pda.amm_event_authority_pda()),
        _ro(PUMP_AMM_PROGRAM_ID),
    ]


def migrate_accounts(
    mint: Pubkey,
    user: Pubkey,
    token_program: Pubkey = TOKEN_PROGRAM_ID,
    withdraw_authority: Pubkey = WITHDRAW_AUTHORITY,
) -> list[AccountMeta]:
    """pump `migrate` (SOL curves): 24 accounts. The pool is PumpSwap pool index 0 created by
    `pool_authority` for (mint, wSOL); `token_program` is the mint's token program.

    The 24-account IDL fixes `token_program` to SPL Token. For a Token-2022 coin this passes Token-2022 there
    and appends SPL Token (the wSOL side's program) as a remaining account: an assumption, since the
    newer `migrate_v2` account table is not in the reference."""
    pool_authority = pda.pool_authority_pda(mint)
    pool = pda.pool_pda(0, pool_authority, mint, WSOL_MINT)
    lp_mint = pda.pool_lp_mint_pda(pool)
    return [
        _ro(pda.global_pda()),
        _w(withdraw_authority),
        _ro(mint),
        _w(pda.bonding_curve_pda(mint)),
        _w(pda.associated_bonding_curve_pda(mint, token_program)),
        AccountMeta(user, is_signer=True, is_writable=False),
        _ro(SYSTEM_PROGRAM_ID),
        _ro(token_program),
        _ro(PUMP_AMM_PROGRAM_ID),
        _w(pool),
        _w(pool_authority),
        _w(pda.associated_token_address(pool_authority, mint, token_program)),
        _w(pda.associated_token_address(pool_authority, WSOL_MINT, TOKEN_PROGRAM_ID)),
        _ro(pda.amm_global_config_pda()),
        _ro(WSOL_MINT),
        _w(lp_mint),
        _w(pda.associated_token_address(pool_authority, lp_mint, TOKEN_2022_PROGRAM_ID)),
        _w(pda.associated_token_address(pool, mint, token_program)),
        _w(pda.associated_token_address(pool, WSOL_MINT, TOKEN_PROGRAM_ID)),
        _ro(TOKEN_2022_PROGRAM_ID),
        _ro(ASSOCIATED_TOKEN_PROGRAM_ID),
        _ro(pda.amm_event_authority_pda()),
        _ro(pda.event_authority_pda()),
        _ro(PUMP_PROGRAM_ID),
    ] + ([_ro(TOKEN_PROGRAM_ID)] if token_program != TOKEN_PROGRAM_ID else [])


# --- whole instructions -----------------------------------------------------------------------------


def associated_token_account_instruction(
    payer: Pubkey, owner: Pubkey, mint: Pubkey, token_program: Pubkey = TOKEN_PROGRAM_ID, *, idempotent: bool = True
) -> Instruction:
    """The Associated Token Account program's `CreateIdempotent` (or `Create`) of `owner`'s account for `mint`."""
    return Instruction(
        ASSOCIATED_TOKEN_PROGRAM_ID,
        bytes([1 if idempotent else 0]),
        [
            _ws(payer),
            _w(pda.associated_token_address(owner, mint, token_program)),
            _ro(owner),
            _ro(mint),
            _ro(SYSTEM_PROGRAM_ID),
            _ro(token_program),
        ],
    )


def create_instruction(mint: Pubkey, user: Pubkey, args: CreateArgs) -> Instruction:
    return Instruction(PUMP_PROGRAM_ID, encode_create(args), create_accounts(mint, user))


def create_v2_instruction(
    mint: Pubkey, user: Pubkey, args: CreateV2Args, quote: QuoteAccounts | None = None
) -> Instruction:
    return Instruction(PUMP_PROGRAM_ID, encode_create_v2(args), create_v2_accounts(mint, user, quote))


def buy_instruction(
    mint: Pubkey,
    user: Pubkey,
    creator: Pubkey,
    fee_recipient: Pubkey,
    buyback_fee_recipient: Pubkey,
    args: BuyArgs,
    token_program: Pubkey = TOKEN_PROGRAM_ID,
) -> Instruction:
    metas = buy_accounts(mint, user, creator, fee_recipient, buyback_fee_recipient, token_program)
    return Instruction(PUMP_PROGRAM_ID, encode_buy(args), metas)


def sell_instruction(
    mint: Pubkey,
    user: Pubkey,
    creator: Pubkey,
    fee_recipient: Pubkey,
    buyback_fee_recipient: Pubkey,
    args: SellArgs,
    token_program: Pubkey = TOKEN_PROGRAM_ID,
) -> Instruction:
    metas = sell_accounts(mint, user, creator, fee_recipient, buyback_fee_recipient, token_program)
    return Instruction(PUMP_PROGRAM_ID, encode_sell(args), metas)


def migrate_instruction(mint: Pubkey, user: Pubkey, token_program: Pubkey = TOKEN_PROGRAM_ID) -> Instruction:
    return Instruction(PUMP_PROGRAM_ID, MIGRATE_DISCRIMINATOR, migrate_accounts(mint, user, token_program))


def create_pool_instruction(
    creator: Pubkey,
    base_mint: Pubkey,
    quote_mint: Pubkey,
    base_token_program: Pubkey,
    args: CreatePoolArgs,
    quote_token_program: Pubkey = TOKEN_PROGRAM_ID,
) -> Instruction:
    metas = create_pool_accounts(args.index, creator, base_mint, quote_mint, base_token_program, quote_token_program)
    return Instruction(PUMP_AMM_PROGRAM_ID, encode_create_pool(args), metas)
