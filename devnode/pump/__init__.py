"""pump.fun bonding curve (Pump program) and PumpSwap: ids, PDAs, account layouts, instruction data,
Anchor events and curve math. Pure code, no I/O.

Facts come from the public program interface: the IDLs and docs of pump-fun/pump-public-docs. The package is
self-contained so that a reader (for example the gateway's signal classifier, which keeps its own copy)
can follow every byte:

* `ids` program ids, well-known accounts, fee recipients
* `pda` every PDA the instructions need
* `accounts` BondingCurve / Global / Pool layouts
* `instructions` discriminators, Borsh args, account orders
* `events` CreateEvent / TradeEvent / CompleteEvent / CreatePoolEvent, emit_cpi and `Program data:` forms
* `curve` integer curve math with protocol 95 bps + creator 30 bps
* `spl` SPL Token / Token-2022 layouts and system/token/ATA instruction data
* `trace` logs and inner-instruction JSON of a described execution
"""

from __future__ import annotations

from devnode.pump.accounts import (
    BONDING_CURVE_ACCOUNT_SIZE,
    BONDING_CURVE_DISCRIMINATOR,
    BondingCurve,
    Global,
    Pool,
    decode_bonding_curve,
    decode_global,
    decode_pool,
    encode_bonding_curve,
    encode_global,
    encode_pool,
)
from devnode.pump.curve import (
    CREATOR_FEE_BPS,
    PROTOCOL_FEE_BPS,
    CurveReserves,
    buy_quote,
    buy_sol_cost,
    buy_tokens_out,
    fee,
    sell_quote,
    sell_sol_out,
)
from devnode.pump.events import (
    EVENT_IX_TAG_LE,
    CompleteEvent,
    CreateEvent,
    CreatePoolEvent,
    TradeEvent,
    decode_event,
    decode_event_cpi,
    decode_program_data_log,
    encode_event,
    event_cpi_data,
    program_data_log,
)
from devnode.pump.ids import PUMP_AMM_PROGRAM_ID, PUMP_PROGRAM_ID
from devnode.pump.instructions import (
    BuyArgs,
    CreateArgs,
    CreatePoolArgs,
    CreateV2Args,
    SellArgs,
    decode_amm_instruction,
    decode_pump_instruction,
)

__all__ = [
    "BONDING_CURVE_ACCOUNT_SIZE",
    "BONDING_CURVE_DISCRIMINATOR",
    "CREATOR_FEE_BPS",
    "EVENT_IX_TAG_LE",
    "PROTOCOL_FEE_BPS",
    "PUMP_AMM_PROGRAM_ID",
    "PUMP_PROGRAM_ID",
    "BondingCurve",
    "BuyArgs",
    "CompleteEvent",
    "CreateArgs",
    "CreateEvent",
    "CreatePoolArgs",
    "CreatePoolEvent",
    "CreateV2Args",
    "CurveReserves",
    "Global",
    "Pool",
    "SellArgs",
    "TradeEvent",
    "buy_quote",
    "buy_sol_cost",
    "buy_tokens_out",
    "decode_amm_instruction",
    "decode_bonding_curve",
    "decode_event",
    "decode_event_cpi",
    "decode_global",
    "decode_pool",
    "decode_program_data_log",
    "decode_pump_instruction",
    "encode_bonding_curve",
    "encode_event",
    "encode_global",
    "encode_pool",
    "event_cpi_data",
    "fee",
    "program_data_log",
    "sell_quote",
    "sell_sol_out",
]
