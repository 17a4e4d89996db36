"""Trades on a bonding curve: pump `buy` (including the whale buy that completes a curve and schedules
its graduation) and `sell`, priced by the curve math with the protocol and creator fee rates and paid to
the fee recipients of the `Global` account the feed writes (`FeedState.pump_global`).
"""

from __future__ import annotations

from solders.keypair import Keypair

from devnode.feed.state import RESERVE, Coin, FeedState, TokenAccount, Tx
from pumpfun import cpi, pda, spl
from pumpfun.accounts import TOKEN_DECIMALS, BondingCurve
from pumpfun.curve import FeeRates, buy_quote, buy_tokens_out, sell_quote
from pumpfun.events import CompleteEvent, Event, TradeEvent
from pumpfun.ids import TOKEN_2022_PROGRAM_ID
from pumpfun.instructions import (
    BuyArgs,
    SellArgs,
    associated_token_account_instruction,
    buy_instruction,
    sell_instruction,
)
from pumpfun.trades import TradeParties, buy_call, sell_call, trade_event


def buy(state: FeedState, coin: Coin, now: int) -> Tx | None:
    user = state.pick_trader()
    sol_in = min(state.sol_amount(0.01, 5.0), state.balance(user.pubkey()) - RESERVE)
    tokens = buy_tokens_out(coin.curve.reserves, sol_in, state.fee_rates(coin.curve))
    if tokens <= 0:
        return None
    tx = Tx("buy", user)
    append_buy(state, tx, coin, user, tokens, now)
    return tx


def whale_buy(state: FeedState, coin: Coin, now: int) -> Tx | None:
    """A buy of every token left on the curve: it completes the curve."""
    user = state.pick_trader()
    cost = buy_quote(coin.curve.reserves, coin.curve.real_token_reserves, state.fee_rates(coin.curve)).total_cost
    if cost + RESERVE + spl.rent_exempt_minimum(spl.TOKEN_2022_ACCOUNT_SIZE) > state.balance(user.pubkey()):
        return buy(state, coin, now)
    tx = Tx("buy", user)
    append_buy(state, tx, coin, user, coin.curve.real_token_reserves, now)
    return tx


def _trade_event(
    state: FeedState,
    parties: TradeParties,
    curve: BondingCurve,
    is_buy: bool,
    sol_amount: int,
    token_amount: int,
    rates: FeeRates,
    fee: int,
    creator_fee: int,
    now: int,
) -> TradeEvent:
    user = parties.user
    if is_buy:
        state.volume[user] = state.volume.get(user, 0) + sol_amount
    return trade_event(
        parties,
        curve,
        is_buy=is_buy,
        sol_amount=sol_amount,
        token_amount=token_amount,
        rates=rates,
        protocol_fee=fee,
        creator_fee=creator_fee,
        track_volume=is_buy,
        current_sol_volume=state.volume.get(user, 0),
        now=now,
    )


def append_buy(state: FeedState, tx: Tx, coin: Coin, user_kp: Keypair, token_amount: int, now: int) -> None:
    user, mint, program = user_kp.pubkey(), coin.mint, coin.token_program
    rates = state.fee_rates(coin.curve)
    quote = buy_quote(coin.curve.reserves, token_amount, rates)
    user_ata = pda.associated_token_address(user, mint, program)
    state.touch_token(tx, user_ata)
    state.touch_token(tx, coin.associated_bonding_curve)
    if user_ata not in state.tokens:
        space = spl.TOKEN_2022_ACCOUNT_SIZE if program == TOKEN_2022_PROGRAM_ID else spl.TOKEN_ACCOUNT_SIZE
        ata_ix = associated_token_account_instruction(user, user, mint, program)
        tx.add(ata_ix, cpi.ata_create(user, user_ata, user, mint, program, idempotent=True, space=space))
        state.debit(user, spl.rent_exempt_minimum(space))
        state.tokens[user_ata] = TokenAccount(mint, user, program, TOKEN_DECIMALS, 0)

    fee_recipient = state.pick_fee_recipient(coin.curve)
    creator_vault = pda.creator_vault_pda(coin.curve.creator)
    max_cost = int(quote.total_cost * (1 + state.slippage()))
    args = BuyArgs(quote.token_amount, max_cost, track_volume=True)
    buyback = state.pick_buyback_fee_recipient()
    ix = buy_instruction(mint, user, coin.curve.creator, fee_recipient, buyback, args, program)
    state.touch_wallets(tx, user, fee_recipient, creator_vault)

    state.debit(user, quote.total_cost)
    state.credit(fee_recipient, quote.protocol_fee)
    state.credit(creator_vault, quote.creator_fee)
    complete = quote.completes
    coin.curve = coin.curve.with_reserves(quote.after, complete=complete)
    state.tokens[coin.associated_bonding_curve].amount -= quote.token_amount
    state.tokens[user_ata].amount += quote.token_amount
    tx.curves[coin.bonding_curve] = coin.curve

    units = state.rng.randint(24_000, 42_000)
    parties = TradeParties(
        mint, program, coin.bonding_curve, coin.associated_bonding_curve, user, user_ata, fee_recipient, creator_vault
    )
    event = _trade_event(
        state,
        parties,
        coin.curve,
        True,
        quote.sol_amount,
        quote.token_amount,
        rates,
        quote.protocol_fee,
        quote.creator_fee,
        now,
    )
    events: list[Event] = [event]
    if complete:
        events.append(CompleteEvent(user, mint, coin.bonding_curve, now, coin.curve.quote_mint))
    call = buy_call(ix, units, parties, quote, events)
    if complete:
        state.graduations.append((state.step + state.rng.randint(1, 3), mint))
    tx.add(ix, call)


def sell(state: FeedState, coin: Coin, holding: TokenAccount, now: int) -> Tx | None:
    user_kp = next((kp for kp in state.traders if kp.pubkey() == holding.owner), None)
    if user_kp is None:
        return None
    user, mint, program = user_kp.pubkey(), coin.mint, coin.token_program
    fraction = state.rng.choice((0.25, 0.5, 1.0, 1.0))
    amount = holding.amount if fraction == 1.0 else int(holding.amount * fraction)
    rates = state.fee_rates(coin.curve)
    quote = sell_quote(coin.curve.reserves, amount, rates)
    if amount <= 0 or quote.sol_out <= 0 or quote.sol_amount > coin.curve.real_sol_reserves:
        return None
    tx = Tx("sell", user_kp)
    user_ata = pda.associated_token_address(user, mint, program)
    state.touch_token(tx, user_ata)
    state.touch_token(tx, coin.associated_bonding_curve)
    fee_recipient = state.pick_fee_recipient(coin.curve)
    creator_vault = pda.creator_vault_pda(coin.curve.creator)
    min_out = int(quote.sol_out * (1 - state.slippage()))
    buyback = state.pick_buyback_fee_recipient()
    ix = sell_instruction(mint, user, coin.curve.creator, fee_recipient, buyback, SellArgs(amount, min_out), program)
    state.touch_wallets(tx, user, fee_recipient, creator_vault)

    state.credit(user, quote.sol_out)
    state.credit(fee_recipient, quote.protocol_fee)
    state.credit(creator_vault, quote.creator_fee)
    coin.curve = coin.curve.with_reserves(quote.after)
    state.tokens[coin.associated_bonding_curve].amount += amount
    holding.amount -= amount
    tx.curves[coin.bonding_curve] = coin.curve

    units = state.rng.randint(20_000, 36_000)
    parties = TradeParties(
        mint, program, coin.bonding_curve, coin.associated_bonding_curve, user, user_ata, fee_recipient, creator_vault
    )
    event = _trade_event(
        state, parties, coin.curve, False, quote.sol_amount, amount, rates, quote.protocol_fee, quote.creator_fee, now
    )
    tx.add(ix, sell_call(ix, units, parties, amount, [event]))
    return tx
