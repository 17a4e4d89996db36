"""Anchor events of pump (`CreateEvent`, `TradeEvent`, `CompleteEvent`, `CompletePumpAmmMigrationEvent`) and
PumpSwap (`CreatePoolEvent`).

An event is `discriminator (sha256("event:<Name>")[:8]) + Borsh fields`. It reaches a client two ways:

* `emit_cpi!`: a self-CPI to the program whose instruction data is `EVENT_IX_TAG_LE + event`, with the
  program's `event_authority` PDA as the only (signer) account. Parse these from the inner instructions.
* a `Program data: <base64 of event>` log line (can be truncated by the runtime's log limit).

Field lists follow `idl/pump.json` (commit 2293f9a) and `idl/pump_amm.json` (commit 0c64400). Fields
added after the reference snapshot (trailing) decode as defaults when absent, so older shorter events parse.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field
from typing import Final

from solders.pubkey import Pubkey

from pumpfun._borsh import BorshError, Reader, Writer

__all__ = [
    "COMPLETE_EVENT_DISCRIMINATOR",
    "COMPLETE_PUMP_AMM_MIGRATION_EVENT_DISCRIMINATOR",
    "CREATE_EVENT_DISCRIMINATOR",
    "CREATE_POOL_EVENT_DISCRIMINATOR",
    "EVENT_IX_TAG_LE",
    "TRADE_EVENT_DISCRIMINATOR",
    "CompleteEvent",
    "CompletePumpAmmMigrationEvent",
    "CreateEvent",
    "CreatePoolEvent",
    "Event",
    "Shareholder",
    "TradeEvent",
    "decode_event",
    "decode_event_cpi",
    "decode_program_data_log",
    "encode_event",
    "event_cpi_data",
    "event_discriminator",
    "program_data_log",
]

#: `0x1d9acb512ea545e4` (the first 8 bytes of sha256("anchor:event"), big-endian) as little-endian bytes.
EVENT_IX_TAG_LE: Final = bytes([228, 69, 165, 46, 81, 203, 154, 29])

CREATE_EVENT_DISCRIMINATOR: Final = bytes([27, 114, 169, 77, 222, 235, 99, 118])
TRADE_EVENT_DISCRIMINATOR: Final = bytes([189, 219, 127, 211, 78, 230, 97, 238])
COMPLETE_EVENT_DISCRIMINATOR: Final = bytes([95, 114, 97, 156, 212, 46, 152, 8])
CREATE_POOL_EVENT_DISCRIMINATOR: Final = bytes([177, 49, 12, 210, 160, 118, 167, 116])
#: Not in the reference arrays: computed as sha256("event:CompletePumpAmmMigrationEvent")[:8].
COMPLETE_PUMP_AMM_MIGRATION_EVENT_DISCRIMINATOR: Final = hashlib.sha256(
    b"event:CompletePumpAmmMigrationEvent"
).digest()[:8]


def event_discriminator(name: str) -> bytes:
    """Anchor event discriminator: `sha256("event:<Name>")[:8]`."""
    return hashlib.sha256(f"event:{name}".encode()).digest()[:8]


@dataclass(frozen=True)
class CreateEvent:
    name: str
    symbol: str
    uri: str
    mint: Pubkey
    bonding_curve: Pubkey
    user: Pubkey
    creator: Pubkey
    timestamp: int
    virtual_token_reserves: int
    virtual_sol_reserves: int
    real_token_reserves: int
    token_total_supply: int
    token_program: Pubkey
    is_mayhem_mode: bool
    is_cashback_enabled: bool
    quote_mint: Pubkey
    virtual_quote_reserves: int
    creator_fee_bps: int = 0
    is_holder_reward: bool = False
    depth: int = 0


@dataclass(frozen=True)
class Shareholder:
    address: Pubkey
    share_bps: int


@dataclass(frozen=True)
class TradeEvent:
    mint: Pubkey
    sol_amount: int
    token_amount: int
    is_buy: bool
    user: Pubkey
    timestamp: int
    virtual_sol_reserves: int
    virtual_token_reserves: int
    real_sol_reserves: int
    real_token_reserves: int
    fee_recipient: Pubkey
    fee_basis_points: int
    fee: int
    creator: Pubkey
    creator_fee_basis_points: int
    creator_fee: int
    track_volume: bool = False
    total_unclaimed_tokens: int = 0
    total_claimed_tokens: int = 0
    current_sol_volume: int = 0
    last_update_timestamp: int = 0
    ix_name: str = ""
    mayhem_mode: bool = False
    cashback_fee_basis_points: int = 0
    cashback: int = 0
    buyback_fee_basis_points: int = 0
    buyback_fee: int = 0
    shareholders: tuple[Shareholder, ...] = ()
    quote_mint: Pubkey = field(default_factory=Pubkey.default)
    quote_amount: int = 0
    virtual_quote_reserves: int = 0
    real_quote_reserves: int = 0
    holder_rewards_bps: int = 0
    holder_rewards: int = 0
    creator_fee_unclaimed: int = 0


@dataclass(frozen=True)
class CompleteEvent:
    user: Pubkey
    mint: Pubkey
    bonding_curve: Pubkey
    timestamp: int
    quote_mint: Pubkey = field(default_factory=Pubkey.default)


@dataclass(frozen=True)
class CompletePumpAmmMigrationEvent:
    """pump's event at the end of `migrate` (liquidity moved to a PumpSwap pool)."""

    user: Pubkey
    mint: Pubkey
    mint_amount: int
    sol_amount: int  # in quote units for a non-SOL curve
    pool_migration_fee: int
    bonding_curve: Pubkey
    timestamp: int
    pool: Pubkey
    quote_mint: Pubkey = field(default_factory=Pubkey.default)


@dataclass(frozen=True)
class CreatePoolEvent:
    """PumpSwap `CreatePoolEvent`."""

    timestamp: int
    index: int
    creator: Pubkey
    base_mint: Pubkey
    quote_mint: Pubkey
    base_mint_decimals: int
    quote_mint_decimals: int
    base_amount_in: int
    quote_amount_in: int
    pool_base_amount: int
    pool_quote_amount: int
    minimum_liquidity: int
    initial_liquidity: int
    lp_token_amount_out: int
    pool_bump: int
    pool: Pubkey
    lp_mint: Pubkey
    user_base_token_account: Pubkey
    user_quote_token_account: Pubkey
    coin_creator: Pubkey


Event = CreateEvent | TradeEvent | CompleteEvent | CompletePumpAmmMigrationEvent | CreatePoolEvent


# --- encoding ---------------------------------------------------------------------------------------


def _encode_create(e: CreateEvent) -> bytes:
    w = Writer(CREATE_EVENT_DISCRIMINATOR).string(e.name).string(e.symbol).string(e.uri)
    w.pubkey(e.mint).pubkey(e.bonding_curve).pubkey(e.user).pubkey(e.creator).i64(e.timestamp)
    w.u64(e.virtual_token_reserves).u64(e.virtual_sol_reserves).u64(e.real_token_reserves).u64(e.token_total_supply)
    w.pubkey(e.token_program).bool(e.is_mayhem_mode).bool(e.is_cashback_enabled).pubkey(e.quote_mint)
    w.u64(e.virtual_quote_reserves).u64(e.creator_fee_bps).bool(e.is_holder_reward).u8(e.depth)
    return w.bytes()


def _encode_trade(e: TradeEvent) -> bytes:
    w = Writer(TRADE_EVENT_DISCRIMINATOR).pubkey(e.mint).u64(e.sol_amount).u64(e.token_amount).bool(e.is_buy)
    w.pubkey(e.user).i64(e.timestamp)
    w.u64(e.virtual_sol_reserves).u64(e.virtual_token_reserves).u64(e.real_sol_reserves).u64(e.real_token_reserves)
    w.pubkey(e.fee_recipient).u64(e.fee_basis_points).u64(e.fee)
    w.pubkey(e.creator).u64(e.creator_fee_basis_points).u64(e.creator_fee)
    w.bool(e.track_volume).u64(e.total_unclaimed_tokens).u64(e.total_claimed_tokens).u64(e.current_sol_volume)
    w.i64(e.last_update_timestamp).string(e.ix_name).bool(e.mayhem_mode)
    w.u64(e.cashback_fee_basis_points).u64(e.cashback).u64(e.buyback_fee_basis_points).u64(e.buyback_fee)
    w.u32(len(e.shareholders))
    for s in e.shareholders:
        w.pubkey(s.address).u16(s.share_bps)
    w.pubkey(e.quote_mint).u64(e.quote_amount).u64(e.virtual_quote_reserves).u64(e.real_quote_reserves)
    w.u64(e.holder_rewards_bps).u64(e.holder_rewards).u64(e.creator_fee_unclaimed)
    return w.bytes()


def _encode_complete(e: CompleteEvent) -> bytes:
    w = Writer(COMPLETE_EVENT_DISCRIMINATOR).pubkey(e.user).pubkey(e.mint).pubkey(e.bonding_curve)
    return w.i64(e.timestamp).pubkey(e.quote_mint).bytes()


def _encode_migration(e: CompletePumpAmmMigrationEvent) -> bytes:
    w = Writer(COMPLETE_PUMP_AMM_MIGRATION_EVENT_DISCRIMINATOR).pubkey(e.user).pubkey(e.mint)
    w.u64(e.mint_amount).u64(e.sol_amount).u64(e.pool_migration_fee).pubkey(e.bonding_curve).i64(e.timestamp)
    return w.pubkey(e.pool).pubkey(e.quote_mint).bytes()


def _encode_create_pool(e: CreatePoolEvent) -> bytes:
    w = Writer(CREATE_POOL_EVENT_DISCRIMINATOR).i64(e.timestamp).u16(e.index)
    w.pubkey(e.creator).pubkey(e.base_mint).pubkey(e.quote_mint).u8(e.base_mint_decimals).u8(e.quote_mint_decimals)
    w.u64(e.base_amount_in).u64(e.quote_amount_in).u64(e.pool_base_amount).u64(e.pool_quote_amount)
    w.u64(e.minimum_liquidity).u64(e.initial_liquidity).u64(e.lp_token_amount_out).u8(e.pool_bump)
    w.pubkey(e.pool).pubkey(e.lp_mint).pubkey(e.user_base_token_account).pubkey(e.user_quote_token_account)
    return w.pubkey(e.coin_creator).bytes()


def encode_event(event: Event) -> bytes:
    """`discriminator + Borsh fields`: the payload of a `Program data:` log line."""
    if isinstance(event, CreateEvent):
        return _encode_create(event)
    if isinstance(event, TradeEvent):
        return _encode_trade(event)
    if isinstance(event, CompleteEvent):
        return _encode_complete(event)
    if isinstance(event, CompletePumpAmmMigrationEvent):
        return _encode_migration(event)
    return _encode_create_pool(event)


def event_cpi_data(event: Event) -> bytes:
    """The instruction data of the `emit_cpi!` self-CPI: `EVENT_IX_TAG_LE + discriminator + Borsh`."""
    return EVENT_IX_TAG_LE + encode_event(event)


def program_data_log(event: Event) -> str:
    """The `Program data: <base64>` log line Anchor's `emit!` writes for `event`."""
    return "Program data: " + base64.b64encode(encode_event(event)).decode()


# --- decoding ---------------------------------------------------------------------------------------


def _decode_create(r: Reader) -> CreateEvent:
    name, symbol, uri = r.string(), r.string(), r.string()
    mint, curve, user, creator = r.pubkey(), r.pubkey(), r.pubkey(), r.pubkey()
    ts = r.i64()
    vtok, vsol, rtok, supply = r.u64(), r.u64(), r.u64(), r.u64()
    token_program = r.pubkey() if r.remaining() >= 32 else Pubkey.default()
    mayhem = r.bool() if not r.at_end() else False
    cashback = r.bool() if not r.at_end() else False
    quote_mint = r.pubkey() if r.remaining() >= 32 else Pubkey.default()
    vquote = r.u64() if r.remaining() >= 8 else vsol
    creator_fee_bps = r.u64() if r.remaining() >= 8 else 0
    holder = r.bool() if not r.at_end() else False
    depth = r.u8() if not r.at_end() else 0
    return CreateEvent(
        name, symbol, uri, mint, curve, user, creator, ts, vtok, vsol, rtok, supply,
        token_program, mayhem, cashback, quote_mint, vquote, creator_fee_bps, holder, depth,
    )  # fmt: skip


def _decode_trade(r: Reader) -> TradeEvent:
    mint, sol, tok, is_buy, user, ts = r.pubkey(), r.u64(), r.u64(), r.bool(), r.pubkey(), r.i64()
    vsol, vtok, rsol, rtok = r.u64(), r.u64(), r.u64(), r.u64()
    fee_recipient, fee_bps, fee = r.pubkey(), r.u64(), r.u64()
    creator, creator_bps, creator_fee = r.pubkey(), r.u64(), r.u64()
    base = TradeEvent(
        mint, sol, tok, is_buy, user, ts, vsol, vtok, rsol, rtok, fee_recipient, fee_bps, fee, creator,
        creator_bps, creator_fee, quote_amount=sol, virtual_quote_reserves=vsol, real_quote_reserves=rsol,
    )  # fmt: skip
    if r.at_end():
        return base
    track, unclaimed, claimed, volume, last_ts = r.bool(), r.u64(), r.u64(), r.u64(), r.i64()
    ix_name, mayhem = r.string(), r.bool()
    cb_bps, cb, bb_bps, bb = r.u64(), r.u64(), r.u64(), r.u64()
    shareholders = tuple(Shareholder(r.pubkey(), r.u16()) for _ in range(r.u32()))
    quote_mint, quote_amount, vquote, rquote = r.pubkey(), r.u64(), r.u64(), r.u64()
    hr_bps = r.u64() if r.remaining() >= 8 else 0
    hr = r.u64() if r.remaining() >= 8 else 0
    unclaimed_creator = r.u64() if r.remaining() >= 8 else 0
    return TradeEvent(
        mint, sol, tok, is_buy, user, ts, vsol, vtok, rsol, rtok, fee_recipient, fee_bps, fee, creator,
        creator_bps, creator_fee, track, unclaimed, claimed, volume, last_ts, ix_name, mayhem, cb_bps, cb,
        bb_bps, bb, shareholders, quote_mint, quote_amount, vquote, rquote, hr_bps, hr, unclaimed_creator,
    )  # fmt: skip


def _decode_complete(r: Reader) -> CompleteEvent:
    user, mint, curve, ts = r.pubkey(), r.pubkey(), r.pubkey(), r.i64()
    quote_mint = r.pubkey() if r.remaining() >= 32 else Pubkey.default()
    return CompleteEvent(user, mint, curve, ts, quote_mint)


def _decode_migration(r: Reader) -> CompletePumpAmmMigrationEvent:
    user, mint, mint_amount, sol_amount, fee = r.pubkey(), r.pubkey(), r.u64(), r.u64(), r.u64()
    curve, ts, pool = r.pubkey(), r.i64(), r.pubkey()
    quote_mint = r.pubkey() if r.remaining() >= 32 else Pubkey.default()
    return CompletePumpAmmMigrationEvent(user, mint, mint_amount, sol_amount, fee, curve, ts, pool, quote_mint)


def _decode_create_pool(r: Reader) -> CreatePoolEvent:
    ts, index = r.i64(), r.u16()
    creator, base_mint, quote_mint = r.pubkey(), r.pubkey(), r.pubkey()
    base_dec, quote_dec = r.u8(), r.u8()
    base_in, quote_in, pool_base, pool_quote = r.u64(), r.u64(), r.u64(), r.u64()
    min_liquidity, initial_liquidity, lp_out, bump = r.u64(), r.u64(), r.u64(), r.u8()
    pool, lp_mint, user_base, user_quote, coin_creator = (r.pubkey() for _ in range(5))
    return CreatePoolEvent(
        ts, index, creator, base_mint, quote_mint, base_dec, quote_dec, base_in, quote_in, pool_base, pool_quote,
        min_liquidity, initial_liquidity, lp_out, bump, pool, lp_mint, user_base, user_quote, coin_creator,
    )  # fmt: skip


def decode_event(data: bytes) -> Event:
    """Decode `discriminator + Borsh` (a `Program data:` payload) into one of the events above."""
    disc, r = data[:8], Reader(data, 8)
    if disc == CREATE_EVENT_DISCRIMINATOR:
        return _decode_create(r)
    if disc == TRADE_EVENT_DISCRIMINATOR:
        return _decode_trade(r)
    if disc == COMPLETE_EVENT_DISCRIMINATOR:
        return _decode_complete(r)
    if disc == CREATE_POOL_EVENT_DISCRIMINATOR:
        return _decode_create_pool(r)
    if disc == COMPLETE_PUMP_AMM_MIGRATION_EVENT_DISCRIMINATOR:
        return _decode_migration(r)
    raise BorshError(f"unknown event discriminator {list(disc)}")


def decode_event_cpi(data: bytes) -> Event:
    """Decode the data of an `emit_cpi!` self-CPI (`EVENT_IX_TAG_LE + event`)."""
    if data[:8] != EVENT_IX_TAG_LE:
        raise BorshError("not an emit_cpi event instruction (EVENT_IX_TAG_LE missing)")
    return decode_event(data[8:])


def decode_program_data_log(line: str) -> Event:
    """Decode a `Program data: <base64>` log line."""
    prefix = "Program data: "
    if not line.startswith(prefix):
        raise BorshError("not a 'Program data:' log line")
    return decode_event(base64.b64decode(line[len(prefix) :]))
