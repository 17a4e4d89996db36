"""Account layouts: pump `BondingCurve` and `Global`, PumpSwap `Pool`, each behind its Anchor discriminator.

A builder reads the two pump accounts to price and address a trade: `decode_global` (fee rates, fee
recipients) and `decode_bonding_curve` (reserves, creator, complete, mayhem mode, quote mint). Neither
layout stores the token program: a curve's token program is its mint's owner (`token_program_of_mint`),
SPL Token for coins made by `create`, Token-2022 for coins made by `create_v2`; both curves share this layout.

BondingCurve offsets (pump-fun/pump-public-docs, docs/PUMP_PROGRAM_README.md; the later fields from the
docs of each upgrade: docs/PUMP_CREATOR_FEE_README.md, the mayhem, cashback and USDC-quote notes):

    0   discriminator [23,183,248,55,96,216,172,96]
    8   virtual_token_reserves u64
    16  virtual_sol_reserves   u64   (renamed virtual_quote_reserves in 2026)
    24  real_token_reserves    u64
    32  real_sol_reserves      u64   (renamed real_quote_reserves)
    40  token_total_supply     u64
    48  complete               bool
    49  creator                pubkey
    81  is_mayhem_mode         bool
    82  is_cashback_coin       bool
    83  quote_mint             pubkey  (Pubkey::default() for SOL coins)
    115 end of the documented fields; the account is allocated 150 bytes, the rest zero.

Curves created before an upgrade are shorter: the missing trailing fields decode as their defaults.
Global: the field list of `idl/pump.json` (the `Global` type, in order) at the reference snapshot; the
fixed arrays hold 7 fee recipients, 7 reserved fee recipients, 8 buyback fee recipients and 1 whitelisted
quote mint. Pool: `idl/pump_amm.json`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Final

from solders.pubkey import Pubkey

from pumpfun._borsh import BorshError, Reader, Writer
from pumpfun.curve import CurveReserves
from pumpfun.ids import (
    BUYBACK_FEE_RECIPIENTS,
    FEE_RECIPIENTS,
    RESERVED_FEE_RECIPIENTS,
    TOKEN_2022_PROGRAM_ID,
    TOKEN_PROGRAM_ID,
)

__all__ = [
    "BONDING_CURVE_ACCOUNT_SIZE",
    "BONDING_CURVE_DISCRIMINATOR",
    "CREATOR_FEE_BPS",
    "GLOBAL_DISCRIMINATOR",
    "INITIAL_REAL_TOKEN_RESERVES",
    "INITIAL_VIRTUAL_SOL_RESERVES",
    "INITIAL_VIRTUAL_TOKEN_RESERVES",
    "POOL_DISCRIMINATOR",
    "POOL_MIGRATION_FEE",
    "PROTOCOL_FEE_BPS",
    "TOKEN_DECIMALS",
    "TOKEN_TOTAL_SUPPLY",
    "BondingCurve",
    "Global",
    "Pool",
    "account_discriminator",
    "decode_bonding_curve",
    "decode_global",
    "decode_pool",
    "encode_bonding_curve",
    "encode_global",
    "encode_pool",
    "token_program_of_mint",
]


def account_discriminator(name: str) -> bytes:
    """Anchor account discriminator: `sha256("account:<Name>")[:8]`."""
    return hashlib.sha256(f"account:{name}".encode()).digest()[:8]


BONDING_CURVE_DISCRIMINATOR: Final = bytes([23, 183, 248, 55, 96, 216, 172, 96])
GLOBAL_DISCRIMINATOR: Final = account_discriminator("Global")
POOL_DISCRIMINATOR: Final = account_discriminator("Pool")

BONDING_CURVE_ACCOUNT_SIZE: Final = 150
_BONDING_CURVE_FIELDS_END: Final = 115

# Example live Global values (docs/PUMP_PROGRAM_README.md).
INITIAL_VIRTUAL_TOKEN_RESERVES: Final = 1_073_000_000_000_000
INITIAL_VIRTUAL_SOL_RESERVES: Final = 30_000_000_000
INITIAL_REAL_TOKEN_RESERVES: Final = 793_100_000_000_000
TOKEN_TOTAL_SUPPLY: Final = 1_000_000_000_000_000
POOL_MIGRATION_FEE: Final = 15_000_001
TOKEN_DECIMALS: Final = 6
#: The current bonding-curve fee tier (docs/fees.png): protocol 0.95% + creator 0.30%. Only the defaults of
#: the example `Global` below; a trade reads the rates from the Global account (`pumpfun.fees.fee_rates`).
PROTOCOL_FEE_BPS: Final = 95
CREATOR_FEE_BPS: Final = 30


def token_program_of_mint(mint_owner: Pubkey) -> Pubkey:
    """The token program a curve trades through: the owner of its mint account (SPL Token or Token-2022)."""
    if mint_owner not in (TOKEN_PROGRAM_ID, TOKEN_2022_PROGRAM_ID):
        raise ValueError(f"a pump mint is owned by SPL Token or Token-2022, not {mint_owner}")
    return mint_owner


@dataclass(frozen=True)
class BondingCurve:
    virtual_token_reserves: int
    virtual_sol_reserves: int
    real_token_reserves: int
    real_sol_reserves: int
    token_total_supply: int
    complete: bool
    creator: Pubkey
    is_mayhem_mode: bool = False
    is_cashback_coin: bool = False
    quote_mint: Pubkey = field(default_factory=Pubkey.default)

    @classmethod
    def new(
        cls,
        creator: Pubkey,
        *,
        quote_mint: Pubkey | None = None,
        virtual_quote_reserves: int = INITIAL_VIRTUAL_SOL_RESERVES,
        is_mayhem_mode: bool = False,
    ) -> BondingCurve:
        """A freshly created curve with the Global initial reserves."""
        return cls(
            virtual_token_reserves=INITIAL_VIRTUAL_TOKEN_RESERVES,
            virtual_sol_reserves=virtual_quote_reserves,
            real_token_reserves=INITIAL_REAL_TOKEN_RESERVES,
            real_sol_reserves=0,
            token_total_supply=TOKEN_TOTAL_SUPPLY,
            complete=False,
            creator=creator,
            is_mayhem_mode=is_mayhem_mode,
            quote_mint=quote_mint if quote_mint is not None else Pubkey.default(),
        )

    @property
    def reserves(self) -> CurveReserves:
        return CurveReserves(
            self.virtual_token_reserves, self.virtual_sol_reserves, self.real_token_reserves, self.real_sol_reserves
        )

    @property
    def is_sol_quoted(self) -> bool:
        return self.quote_mint == Pubkey.default()

    def with_reserves(self, reserves: CurveReserves, *, complete: bool | None = None) -> BondingCurve:
        return BondingCurve(
            virtual_token_reserves=reserves.virtual_token_reserves,
            virtual_sol_reserves=reserves.virtual_sol_reserves,
            real_token_reserves=reserves.real_token_reserves,
            real_sol_reserves=reserves.real_sol_reserves,
            token_total_supply=self.token_total_supply,
            complete=self.complete if complete is None else complete,
            creator=self.creator,
            is_mayhem_mode=self.is_mayhem_mode,
            is_cashback_coin=self.is_cashback_coin,
            quote_mint=self.quote_mint,
        )


def encode_bonding_curve(curve: BondingCurve, size: int = BONDING_CURVE_ACCOUNT_SIZE) -> bytes:
    """The account data: discriminator, the fields at their documented offsets, zero padding to `size`."""
    data = (
        Writer(BONDING_CURVE_DISCRIMINATOR)
        .u64(curve.virtual_token_reserves)
        .u64(curve.virtual_sol_reserves)
        .u64(curve.real_token_reserves)
        .u64(curve.real_sol_reserves)
        .u64(curve.token_total_supply)
        .bool(curve.complete)
        .pubkey(curve.creator)
        .bool(curve.is_mayhem_mode)
        .bool(curve.is_cashback_coin)
        .pubkey(curve.quote_mint)
        .bytes()
    )
    if size < len(data):
        raise ValueError(f"size {size} is below the {len(data)} bytes of the fields")
    return data + bytes(size - len(data))


def decode_bonding_curve(data: bytes) -> BondingCurve:
    """Decode a BondingCurve account; older, shorter accounts read the missing trailing fields as defaults."""
    if data[:8] != BONDING_CURVE_DISCRIMINATOR:
        raise BorshError("not a BondingCurve account (discriminator mismatch)")
    r = Reader(data, 8)
    vtok, vsol, rtok, rsol, supply = r.u64(), r.u64(), r.u64(), r.u64(), r.u64()
    complete = r.bool()
    creator = r.pubkey() if r.remaining() >= 32 else Pubkey.default()
    mayhem = r.bool() if r.remaining() >= 1 else False
    cashback = r.bool() if r.remaining() >= 1 else False
    quote_mint = r.pubkey() if r.remaining() >= 32 else Pubkey.default()
    return BondingCurve(vtok, vsol, rtok, rsol, supply, complete, creator, mayhem, cashback, quote_mint)


@dataclass(frozen=True)
class Global:
    """The pump `Global` account (fields in IDL order, through `whitelisted_quote_mints`).

    Defaults: the documented example reserves and migration fee, with the current bonding-curve fee tier
    (protocol 95 bps, creator 30 bps) in place of the historical `fee_basis_points` of 100, and the
    published fee, reserved and buyback recipient lists (docs/FEE_RECIPIENTS.md).
    """

    initialized: bool = True
    authority: Pubkey = field(default_factory=Pubkey.default)
    fee_recipient: Pubkey = FEE_RECIPIENTS[0]
    initial_virtual_token_reserves: int = INITIAL_VIRTUAL_TOKEN_RESERVES
    initial_virtual_sol_reserves: int = INITIAL_VIRTUAL_SOL_RESERVES
    initial_real_token_reserves: int = INITIAL_REAL_TOKEN_RESERVES
    token_total_supply: int = TOKEN_TOTAL_SUPPLY
    fee_basis_points: int = PROTOCOL_FEE_BPS
    withdraw_authority: Pubkey = field(default_factory=Pubkey.default)
    enable_migrate: bool = True
    pool_migration_fee: int = POOL_MIGRATION_FEE
    creator_fee_basis_points: int = CREATOR_FEE_BPS
    fee_recipients: tuple[Pubkey, ...] = FEE_RECIPIENTS[1:]
    set_creator_authority: Pubkey = field(default_factory=Pubkey.default)
    admin_set_creator_authority: Pubkey = field(default_factory=Pubkey.default)
    create_v2_enabled: bool = True
    whitelist_pda: Pubkey = field(default_factory=Pubkey.default)
    reserved_fee_recipient: Pubkey = RESERVED_FEE_RECIPIENTS[0]
    mayhem_mode_enabled: bool = True
    reserved_fee_recipients: tuple[Pubkey, ...] = RESERVED_FEE_RECIPIENTS[1:]
    is_cashback_enabled: bool = False
    buyback_fee_recipients: tuple[Pubkey, ...] = BUYBACK_FEE_RECIPIENTS
    buyback_basis_points: int = 0
    initial_virtual_quote_reserves: int = INITIAL_VIRTUAL_SOL_RESERVES
    whitelisted_quote_mints: tuple[Pubkey, ...] = field(default_factory=lambda: (Pubkey.default(),))


_GLOBAL_ARRAYS: Final = {
    "fee_recipients": 7,
    "reserved_fee_recipients": 7,
    "buyback_fee_recipients": 8,
    "whitelisted_quote_mints": 1,
}


def encode_global(g: Global) -> bytes:
    for name, n in _GLOBAL_ARRAYS.items():
        if len(getattr(g, name)) != n:
            raise ValueError(f"Global.{name} must hold {n} pubkeys")
    w = Writer(GLOBAL_DISCRIMINATOR)
    w.bool(g.initialized).pubkey(g.authority).pubkey(g.fee_recipient)
    w.u64(g.initial_virtual_token_reserves).u64(g.initial_virtual_sol_reserves)
    w.u64(g.initial_real_token_reserves).u64(g.token_total_supply).u64(g.fee_basis_points)
    w.pubkey(g.withdraw_authority).bool(g.enable_migrate).u64(g.pool_migration_fee).u64(g.creator_fee_basis_points)
    for pk in g.fee_recipients:
        w.pubkey(pk)
    w.pubkey(g.set_creator_authority).pubkey(g.admin_set_creator_authority).bool(g.create_v2_enabled)
    w.pubkey(g.whitelist_pda).pubkey(g.reserved_fee_recipient).bool(g.mayhem_mode_enabled)
    for pk in g.reserved_fee_recipients:
        w.pubkey(pk)
    w.bool(g.is_cashback_enabled)
    for pk in g.buyback_fee_recipients:
        w.pubkey(pk)
    w.u64(g.buyback_basis_points).u64(g.initial_virtual_quote_reserves)
    for pk in g.whitelisted_quote_mints:
        w.pubkey(pk)
    return w.bytes()


def decode_global(data: bytes) -> Global:
    if data[:8] != GLOBAL_DISCRIMINATOR:
        raise BorshError("not a Global account (discriminator mismatch)")
    r = Reader(data, 8)

    def keys(n: int) -> tuple[Pubkey, ...]:
        return tuple(r.pubkey() for _ in range(n))

    return Global(
        initialized=r.bool(),
        authority=r.pubkey(),
        fee_recipient=r.pubkey(),
        initial_virtual_token_reserves=r.u64(),
        initial_virtual_sol_reserves=r.u64(),
        initial_real_token_reserves=r.u64(),
        token_total_supply=r.u64(),
        fee_basis_points=r.u64(),
        withdraw_authority=r.pubkey(),
        enable_migrate=r.bool(),
        pool_migration_fee=r.u64(),
        creator_fee_basis_points=r.u64(),
        fee_recipients=keys(7),
        set_creator_authority=r.pubkey(),
        admin_set_creator_authority=r.pubkey(),
        create_v2_enabled=r.bool(),
        whitelist_pda=r.pubkey(),
        reserved_fee_recipient=r.pubkey(),
        mayhem_mode_enabled=r.bool(),
        reserved_fee_recipients=keys(7),
        is_cashback_enabled=r.bool(),
        buyback_fee_recipients=keys(8),
        buyback_basis_points=r.u64(),
        initial_virtual_quote_reserves=r.u64(),
        whitelisted_quote_mints=keys(1),
    )


@dataclass(frozen=True)
class Pool:
    """The PumpSwap `Pool` account."""

    pool_bump: int
    index: int
    creator: Pubkey
    base_mint: Pubkey
    quote_mint: Pubkey
    lp_mint: Pubkey
    pool_base_token_account: Pubkey
    pool_quote_token_account: Pubkey
    lp_supply: int
    coin_creator: Pubkey
    is_mayhem_mode: bool = False
    is_cashback_coin: bool = False


def encode_pool(p: Pool) -> bytes:
    w = Writer(POOL_DISCRIMINATOR).u8(p.pool_bump).u16(p.index)
    for pk in (
        p.creator,
        p.base_mint,
        p.quote_mint,
        p.lp_mint,
        p.pool_base_token_account,
        p.pool_quote_token_account,
    ):
        w.pubkey(pk)
    return w.u64(p.lp_supply).pubkey(p.coin_creator).bool(p.is_mayhem_mode).bool(p.is_cashback_coin).bytes()


def decode_pool(data: bytes) -> Pool:
    if data[:8] != POOL_DISCRIMINATOR:
        raise BorshError("not a Pool account (discriminator mismatch)")
    r = Reader(data, 8)
    bump, index = r.u8(), r.u16()
    creator, base, quote, lp, pbase, pquote = (r.pubkey() for _ in range(6))
    lp_supply, coin_creator = r.u64(), r.pubkey()
    mayhem = r.bool() if r.remaining() >= 1 else False
    cashback = r.bool() if r.remaining() >= 1 else False
    return Pool(bump, index, creator, base, quote, lp, pbase, pquote, lp_supply, coin_creator, mayhem, cashback)
