"""The pump program's legacy `buy` and `sell`, executed: the checks the program makes, with its errors, then the
effects, priced by the shared integer curve math at the fee rates of the on-chain `Global` account.

Order, as an Anchor program runs: the `Instruction: Buy|Sell` log line, the instruction data (else
`InstructionDidNotDeserialize`), the accounts (`pump_accounts`), then the program's own checks: Global initialized,
the fee recipient one of the Global's (`NotAuthorized`), `bonding_curve_v2` and the buyback fee recipient as the
2026 upgrades require them, the curve not complete, a non-zero amount, the slippage bound (`TooMuchSolRequired`
/ `TooLittleSolReceived`), enough tokens to sell. Then the CPIs of `pumpfun.trades` (a failing one fails the
buy with its own error, e.g. the System program's "insufficient lamports"), the curve's new reserves (complete when
the real token reserves reach zero) and the TradeEvent (and CompleteEvent).

A buy of `amount` tokens is `pumpfun.curve.buy_quote` (capped, as there, at the real token reserves); a sell is
`sell_quote`. `buy_exact_sol_in` and the v2 trades (`buy_v2`, `sell_v2`, `buy_exact_quote_in_v2`) are
`pump_v2`'s, which reuses the checks and effects here. Not emulated: the other pump instructions, the volume
accumulators (`current_sol_volume` is the trade's own volume) and the buyback fee (`Global.buyback_basis_points`,
which `pumpfun.fees` does not model either).

The fee recipient and the creator vault are exempt from the runtime's rent-state rule: on mainnet they hold far
more than their rent-exempt minimum, on the devnode they hold what the feed has paid them so far, so a small
trade's fee into a fresh one would otherwise fail with `InsufficientFundsForRent`, which mainnet never shows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Final

from solders.pubkey import Pubkey

from devnode.pump_exec.anchor import anchor_failure
from devnode.pump_exec.context import Failed, Ix, Scratch, account_with
from devnode.pump_exec.errors import instruction_error_text, unsupported
from devnode.pump_exec.pump_accounts import TradeAccounts, check_trade_accounts
from devnode.pump_exec.system import transfer_lamports
from devnode.pump_exec.token import move_tokens, token_account
from pumpfun import pda
from pumpfun._borsh import BorshError
from pumpfun.accounts import BONDING_CURVE_ACCOUNT_SIZE, TOKEN_DECIMALS, BondingCurve, encode_bonding_curve
from pumpfun.curve import BuyQuote, buy_quote, sell_quote
from pumpfun.errors import AnchorError, PumpError
from pumpfun.events import CompleteEvent, Event
from pumpfun.fees import buyback_fee_recipients, fee_rates, fee_recipients
from pumpfun.ids import TOKEN_2022_PROGRAM_ID
from pumpfun.instructions import (
    BUY_DISCRIMINATOR,
    CREATE_DISCRIMINATOR,
    CREATE_V2_DISCRIMINATOR,
    MIGRATE_DISCRIMINATOR,
    SELL_DISCRIMINATOR,
    BuyArgs,
    SellArgs,
    decode_pump_instruction,
)
from pumpfun.trace import Call, FailedCall
from pumpfun.trades import buy_call, sell_call, trade_event

__all__ = ["buy_effects", "program_checks", "pump", "run_cpis", "write_curve"]

#: Compute units the program spends itself (its CPIs add theirs): typical figures, as the feed's.
_BUY_UNITS: Final = 33_000
_SELL_UNITS: Final = 28_000
_ACCOUNT_CHECK_UNITS: Final = 6_000
_PROGRAM_CHECK_UNITS: Final = 14_000
_NOT_EMULATED: Final = {
    CREATE_DISCRIMINATOR: "pump create",
    CREATE_V2_DISCRIMINATOR: "pump create_v2",
    MIGRATE_DISCRIMINATOR: "pump migrate",
}


def program_checks(accounts: TradeAccounts) -> None:
    """What the program checks itself before trading, in its order."""
    g, curve, parties = accounts.global_, accounts.curve, accounts.parties
    if not g.initialized:
        raise anchor_failure(PumpError.NotInitialized)
    if parties.fee_recipient not in fee_recipients(g, curve):
        raise anchor_failure(PumpError.NotAuthorized)
    remaining = accounts.remaining
    if not remaining or remaining[0].pubkey != pda.bonding_curve_v2_pda(parties.mint):
        raise anchor_failure(PumpError.InvalidBondingCurveV2)
    if len(remaining) < 2:
        raise anchor_failure(PumpError.BuybackFeeRecipientMissing)
    if remaining[1].pubkey not in buyback_fee_recipients(g):
        raise anchor_failure(PumpError.BuybackFeeRecipientNotAuthorized)
    if curve.complete:
        raise anchor_failure(PumpError.BondingCurveComplete)
    if not curve.is_sol_quoted:
        raise unsupported(f"a legacy trade on a curve quoted in {curve.quote_mint} (it trades through buy_v2/sell_v2)")


def run_cpis(call: Call, effects: list[Callable[[], None]]) -> None:
    """Apply the effect of each CPI of `call` in order; when one fails, fail `call` there, with the CPIs before
    it and the failed one (its own lines, then why it failed) in its rendering."""
    cpis = [item for item in call.body if isinstance(item, Call)]
    for cpi, effect in zip(cpis, effects, strict=False):
        try:
            effect()
        except Failed as failure:
            text = instruction_error_text(failure.err)
            failed_cpi = FailedCall(cpi.program, cpi.accounts, cpi.data, cpi.units, [*cpi.body, *failure.logs], text)
            body = [*call.body[: call.body.index(cpi)], failed_cpi]
            failed = FailedCall(call.program, call.accounts, call.data, call.units, body, text)
            raise Failed(failure.err, call=failed) from failure


def write_curve(scratch: Scratch, address: Pubkey, curve: BondingCurve) -> None:
    account = scratch.get(address)
    assert account is not None  # checked as the instruction's bonding_curve
    size = max(len(bytes(account.data)), BONDING_CURVE_ACCOUNT_SIZE)
    scratch.put(address, account_with(account, data=encode_bonding_curve(curve, size)))


def _token_cpi_checks(accounts: TradeAccounts) -> tuple[Pubkey | None, int | None]:
    """The mint and decimals a token CPI passes: TransferChecked on Token-2022, Transfer on SPL Token."""
    if accounts.parties.token_program == TOKEN_2022_PROGRAM_ID:
        return accounts.parties.mint, TOKEN_DECIMALS
    return None, None


def _buy(scratch: Scratch, ix: Ix, now: int, args: BuyArgs, accounts: TradeAccounts) -> Call:
    if args.amount == 0:
        raise anchor_failure(PumpError.BuyZeroAmount)
    quote = buy_quote(accounts.curve.reserves, args.amount, fee_rates(accounts.global_, accounts.curve))
    if quote.token_amount == 0:
        raise anchor_failure(PumpError.NotEnoughTokensToBuy)
    if quote.total_cost > args.max_sol_cost:
        raise anchor_failure(PumpError.TooMuchSolRequired)
    return buy_effects(scratch, ix, now, accounts, quote, args.track_volume)


def buy_effects(
    scratch: Scratch,
    ix: Ix,
    now: int,
    accounts: TradeAccounts,
    quote: BuyQuote,
    track_volume: bool,
    ix_name: str = "buy",
    units: int = _BUY_UNITS,
) -> Call:
    """A legacy-accounts buy whose checks passed (`buy`, `buy_exact_sol_in`): tokens to the user, lamports to the
    curve and the fee recipients, the events, the curve's new reserves."""
    g, curve, p = accounts.global_, accounts.curve, accounts.parties
    scratch.waive_rent_rule(p.fee_recipient, p.creator_vault)
    rates = fee_rates(g, curve)
    after = curve.with_reserves(quote.after, complete=quote.completes)
    volume = quote.sol_amount if track_volume else 0
    event = trade_event(
        p,
        after,
        is_buy=True,
        sol_amount=quote.sol_amount,
        token_amount=quote.token_amount,
        rates=rates,
        protocol_fee=quote.protocol_fee,
        creator_fee=quote.creator_fee,
        track_volume=track_volume,
        current_sol_volume=volume,
        now=now,
    )
    events: list[Event] = [replace(event, ix_name=ix_name)]
    if quote.completes:
        events.append(CompleteEvent(p.user, p.mint, p.bonding_curve, now, after.quote_mint))
    call = buy_call(ix.instruction(), units, p, quote, events)
    mint, decimals = _token_cpi_checks(accounts)
    tp, abc, user_ata, bc = p.token_program, p.associated_bonding_curve, p.user_token_account, p.bonding_curve
    run_cpis(
        call,
        [
            lambda: move_tokens(
                scratch, tp, abc, user_ata, bc, quote.token_amount, signed=True, mint=mint, decimals=decimals
            ),
            lambda: transfer_lamports(scratch, p.user, p.bonding_curve, quote.sol_amount, signed=True),
            lambda: transfer_lamports(scratch, p.user, p.fee_recipient, quote.protocol_fee, signed=True),
            lambda: transfer_lamports(scratch, p.user, p.creator_vault, quote.creator_fee, signed=True),
        ],
    )
    write_curve(scratch, p.bonding_curve, after)
    return call


def _sell(scratch: Scratch, ix: Ix, now: int, args: SellArgs, accounts: TradeAccounts) -> Call:
    g, curve, p = accounts.global_, accounts.curve, accounts.parties
    scratch.waive_rent_rule(p.fee_recipient, p.creator_vault)
    if args.amount == 0:
        raise anchor_failure(PumpError.SellZeroAmount)
    if token_account(scratch, p.user_token_account, p.token_program).amount < args.amount:
        raise anchor_failure(PumpError.NotEnoughTokensToSell)
    rates = fee_rates(g, curve)
    quote = sell_quote(curve.reserves, args.amount, rates)
    if quote.sol_amount > curve.real_sol_reserves or quote.sol_out < 0:
        raise anchor_failure(PumpError.Overflow)
    if quote.sol_out < args.min_sol_output:
        raise anchor_failure(PumpError.TooLittleSolReceived)
    after = curve.with_reserves(quote.after)
    event = trade_event(
        p,
        after,
        is_buy=False,
        sol_amount=quote.sol_amount,
        token_amount=args.amount,
        rates=rates,
        protocol_fee=quote.protocol_fee,
        creator_fee=quote.creator_fee,
        track_volume=False,
        current_sol_volume=0,
        now=now,
    )
    call = sell_call(ix.instruction(), _SELL_UNITS, p, args.amount, [event])
    mint, decimals = _token_cpi_checks(accounts)
    tp, user_ata, abc = p.token_program, p.user_token_account, p.associated_bonding_curve
    run_cpis(
        call,
        [
            lambda: move_tokens(
                scratch, tp, user_ata, abc, p.user, args.amount, signed=True, mint=mint, decimals=decimals
            )
        ],
    )
    # The program owns the curve and pays out of its lamports directly.
    scratch.set_lamports(p.bonding_curve, scratch.lamports(p.bonding_curve) - quote.sol_amount)
    for recipient, lamports in (
        (p.user, quote.sol_out),
        (p.fee_recipient, quote.protocol_fee),
        (p.creator_vault, quote.creator_fee),
    ):
        scratch.set_lamports(recipient, scratch.lamports(recipient) + lamports)
    write_curve(scratch, p.bonding_curve, after)
    return call


def _trade(scratch: Scratch, ix: Ix, now: int, is_buy: bool) -> Call:
    head = f"Program log: Instruction: {'Buy' if is_buy else 'Sell'}"
    units = _ACCOUNT_CHECK_UNITS
    try:
        try:
            args = decode_pump_instruction(ix.data)
        except (BorshError, ValueError):
            raise anchor_failure(AnchorError.InstructionDidNotDeserialize) from None
        accounts = check_trade_accounts(scratch, ix, is_buy)
        units = _PROGRAM_CHECK_UNITS
        program_checks(accounts)
        if isinstance(args, BuyArgs):
            return _buy(scratch, ix, now, args, accounts)
        assert isinstance(args, SellArgs)
        return _sell(scratch, ix, now, args, accounts)
    except Failed as failure:
        if failure.call is not None:
            raise
        raise Failed(failure.err, [head, *failure.logs], units=units) from failure


def pump(scratch: Scratch, ix: Ix, now: int) -> Call:
    """A top-level pump instruction: `buy` or `sell`; any other fails as not emulated."""
    disc = ix.data[:8]
    if disc in (BUY_DISCRIMINATOR, SELL_DISCRIMINATOR):
        return _trade(scratch, ix, now, is_buy=disc == BUY_DISCRIMINATOR)
    raise unsupported(_NOT_EMULATED.get(disc, "this pump instruction"))
