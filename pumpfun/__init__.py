"""pump.fun bonding curve (Pump program) and PumpSwap: ids, PDAs, account layouts, instruction data,
Anchor events and curve math. Pure code, no I/O.

Facts come from the public program interface: the IDLs and docs of pump-fun/pump-public-docs. The package is
self-contained and imports nothing of the gateway, the devnode or any I/O library (the `pumpfun-pure` import
contract), so that the devnode's launch feed and the gateway's trade builders share one copy and a reader can
follow every byte:

* `ids` program ids, well-known accounts, fee recipients
* `pda` every PDA the instructions need
* `accounts` BondingCurve / Global / Pool layouts
* `instructions` discriminators, Borsh args, account orders, whole buy/sell/create instructions
* `events` CreateEvent / TradeEvent / CompleteEvent / CreatePoolEvent, emit_cpi and `Program data:` forms
* `curve` integer curve math (quotes, the exact inverse `max_tokens_for_sol`) at explicit `FeeRates`
* `fees` the fee rates and recipients of a trade, read from the `Global` account
* `errors` the program and Anchor error codes a buy or sell fails with
* `spl` SPL Token / Token-2022 layouts and system/token/ATA instruction data
* `wsol` wrapping SOL around a trade on a wrapped-SOL-quoted curve (fund and sync, then close)
* `cpi`, `trace` the inner instructions, logs and inner-instruction JSON of a described execution (a failed
  one too: `trace.FailedCall`)
* `trades` the described execution of a legacy buy / sell (its CPIs and events), shared by the devnode's feed
  and its emulation of the trades users sign
"""

from __future__ import annotations

from pumpfun.accounts import (
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
from pumpfun.curve import (
    BuyQuote,
    CurveReserves,
    FeeRates,
    SellQuote,
    buy_quote,
    buy_sol_cost,
    buy_tokens_out,
    fee,
    market_cap_lamports,
    max_tokens_for_sol,
    sell_quote,
    sell_sol_out,
)
from pumpfun.errors import AnchorError, PumpError, error_message, error_name
from pumpfun.events import (
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
from pumpfun.fees import buyback_fee_recipients, fee_rates, fee_recipients
from pumpfun.ids import PUMP_AMM_PROGRAM_ID, PUMP_PROGRAM_ID
from pumpfun.instructions import (
    BuyArgs,
    CreateArgs,
    CreatePoolArgs,
    CreateV2Args,
    SellArgs,
    associated_token_account_instruction,
    buy_instruction,
    decode_amm_instruction,
    decode_pump_instruction,
    sell_instruction,
)

__all__ = [
    "BONDING_CURVE_ACCOUNT_SIZE",
    "BONDING_CURVE_DISCRIMINATOR",
    "EVENT_IX_TAG_LE",
    "PUMP_AMM_PROGRAM_ID",
    "PUMP_PROGRAM_ID",
    "AnchorError",
    "BondingCurve",
    "BuyArgs",
    "BuyQuote",
    "CompleteEvent",
    "CreateArgs",
    "CreateEvent",
    "CreatePoolArgs",
    "CreatePoolEvent",
    "CreateV2Args",
    "CurveReserves",
    "FeeRates",
    "Global",
    "Pool",
    "PumpError",
    "SellArgs",
    "SellQuote",
    "TradeEvent",
    "associated_token_account_instruction",
    "buy_instruction",
    "buy_quote",
    "buy_sol_cost",
    "buy_tokens_out",
    "buyback_fee_recipients",
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
    "error_message",
    "error_name",
    "event_cpi_data",
    "fee",
    "fee_rates",
    "fee_recipients",
    "market_cap_lamports",
    "max_tokens_for_sol",
    "program_data_log",
    "sell_instruction",
    "sell_quote",
    "sell_sol_out",
]
