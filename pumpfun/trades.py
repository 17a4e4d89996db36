"""What a legacy pump `buy` or `sell` does once its checks pass, described as a `Call`: the token transfer, the
lamport movements, the `TradeEvent` (and on the last buy the `CompleteEvent`), in the order the program makes them.

Shared by the devnode's launch feed (which invents trades) and its transaction emulator (which executes the trades
users sign), so that both render a trade the same way. The order and the events follow what mainnet buys and
sells show (pump-fun/pump-public-docs, `idl/pump.json` for the event fields): a buy moves the tokens out of the
associated bonding curve, then pays the curve, the fee recipient and the creator vault through the System
program; a sell moves the tokens into the curve and the program pays out of the curve's own lamports (it owns
the curve, so no System CPI appears).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from solders.instruction import Instruction
from solders.pubkey import Pubkey

from pumpfun import cpi, pda
from pumpfun.accounts import TOKEN_DECIMALS, BondingCurve
from pumpfun.curve import BuyQuote, FeeRates
from pumpfun.events import Event, TradeEvent
from pumpfun.ids import PUMP_PROGRAM_ID
from pumpfun.trace import Call

__all__ = ["TradeParties", "buy_call", "sell_call", "trade_event", "trade_top_call"]


@dataclass(frozen=True)
class TradeParties:
    """The accounts a legacy buy or sell moves tokens and lamports between."""

    mint: Pubkey
    token_program: Pubkey
    bonding_curve: Pubkey
    associated_bonding_curve: Pubkey
    user: Pubkey
    user_token_account: Pubkey
    fee_recipient: Pubkey
    creator_vault: Pubkey


def trade_top_call(ix: Instruction, units: int, name: str) -> Call:
    """The top-level pump call of `ix`, opened with Anchor's `Instruction: <Name>` log line."""
    call = Call(ix.program_id, [m.pubkey for m in ix.accounts], bytes(ix.data), units=units)
    return call.log(f"Program log: Instruction: {name}")


def trade_event(
    parties: TradeParties,
    curve_after: BondingCurve,
    *,
    is_buy: bool,
    sol_amount: int,
    token_amount: int,
    rates: FeeRates,
    protocol_fee: int,
    creator_fee: int,
    track_volume: bool,
    current_sol_volume: int,
    now: int,
) -> TradeEvent:
    """The `TradeEvent` of a trade; the reserves are the curve's after the trade, as the program emits them."""
    return TradeEvent(
        mint=parties.mint,
        sol_amount=sol_amount,
        token_amount=token_amount,
        is_buy=is_buy,
        user=parties.user,
        timestamp=now,
        virtual_sol_reserves=curve_after.virtual_sol_reserves,
        virtual_token_reserves=curve_after.virtual_token_reserves,
        real_sol_reserves=curve_after.real_sol_reserves,
        real_token_reserves=curve_after.real_token_reserves,
        fee_recipient=parties.fee_recipient,
        fee_basis_points=rates.protocol_bps,
        fee=protocol_fee,
        creator=curve_after.creator,
        creator_fee_basis_points=rates.creator_bps,
        creator_fee=creator_fee,
        track_volume=track_volume,
        current_sol_volume=current_sol_volume,
        last_update_timestamp=now,
        ix_name="buy" if is_buy else "sell",
        mayhem_mode=curve_after.is_mayhem_mode,
        quote_mint=curve_after.quote_mint,
        quote_amount=sol_amount,
        virtual_quote_reserves=curve_after.virtual_sol_reserves,
        real_quote_reserves=curve_after.real_sol_reserves,
    )


def _emit(call: Call, events: Sequence[Event]) -> Call:
    for event in events:
        cpi.emit_event(call, PUMP_PROGRAM_ID, pda.event_authority_pda(), event)
    return call


def buy_call(ix: Instruction, units: int, parties: TradeParties, quote: BuyQuote, events: Sequence[Event]) -> Call:
    """A buy that succeeded: tokens to the user, then lamports to the curve, the fee recipient and the creator
    vault, then `events` (the TradeEvent, and the CompleteEvent when the buy takes the last token)."""
    p = parties
    call = trade_top_call(ix, units, "Buy")
    call.cpi(
        cpi.token_transfer(
            p.token_program,
            p.associated_bonding_curve,
            p.mint,
            p.user_token_account,
            p.bonding_curve,
            quote.token_amount,
            TOKEN_DECIMALS,
        )
    )
    call.cpi(cpi.system_transfer(p.user, p.bonding_curve, quote.sol_amount))
    call.cpi(cpi.system_transfer(p.user, p.fee_recipient, quote.protocol_fee))
    call.cpi(cpi.system_transfer(p.user, p.creator_vault, quote.creator_fee))
    return _emit(call, events)


def sell_call(ix: Instruction, units: int, parties: TradeParties, token_amount: int, events: Sequence[Event]) -> Call:
    """A sell that succeeded: tokens from the user to the curve, then `events`. The program pays the seller, the
    fee recipient and the creator vault out of the curve's lamports directly (no CPI)."""
    p = parties
    call = trade_top_call(ix, units, "Sell")
    call.cpi(
        cpi.token_transfer(
            p.token_program,
            p.user_token_account,
            p.mint,
            p.associated_bonding_curve,
            p.user,
            token_amount,
            TOKEN_DECIMALS,
        )
    )
    return _emit(call, events)
