"""The trade builders' decisions and assembly: from the accounts the node returned to a quote and an
unsigned v0 transaction, or the refusal naming why not. Pure: no I/O, no storage.

The pump.fun facts (PDAs, account layouts, instruction encoders, fee rates, curve math) are the
:mod:`pumpfun` package's, which cites its public sources (pump-fun/pump-public-docs: ``idl/pump.json``,
``docs/PUMP_PROGRAM_README.md``, ``docs/bondingCurve.ts``, ``docs/FEE_RECIPIENTS.md``). What is decided here:

- which curves can be traded: a live curve (not ``complete``, reserves left) quoted in SOL (classic and v2
  curves, ``quote_mint`` the default key) or in wrapped SOL; a completed curve is refused naming the
  PumpSwap pool it graduates to (index 0, created by the mint's ``pool-authority``, paired with wSOL);
  any other quote mint is refused;
- the quote: a snipe buys the most tokens whose cost, fees included, fits ``amount_sol`` at the curve's
  state (:func:`pumpfun.curve.max_tokens_for_sol`); ``max_sol_cost`` is that cost plus ``slippage_bps``
  of it, rounded down. A sell's estimate is the curve's net payout (:func:`pumpfun.curve.sell_quote`),
  ``min_sol_output`` that minus ``slippage_bps`` of it, rounded up. Both roundings protect the trader;
- the transaction, unsigned v0 without lookup tables, the caller as fee payer and trader::

    snipe: SetComputeUnitLimit, SetComputeUnitPrice, ATA CreateIdempotent (the mint's token program),
           [wSOL: ATA CreateIdempotent, System Transfer of max_sol_cost, SyncNative], pump buy,
           [wSOL: CloseAccount]
    sell:  SetComputeUnitLimit, SetComputeUnitPrice, [wSOL: ATA CreateIdempotent], pump sell,
           [wSOL: CloseAccount]

  The pump buy or sell by curve kind (docs/api.md, Trade builders): a SOL coin (``quote_mint`` the default
  key, classic or v2) trades through the legacy ``buy`` / ``sell`` (``buy_exact_sol_in`` for an ``exact_in``
  snipe); a curve whose own quote mint is wrapped SOL through ``buy_v2`` / ``sell_v2``
  (``buy_exact_quote_in_v2``), which move the quote as wSOL tokens out of and into the wallet's wSOL account.
  An ``exact_in`` snipe spends the budget whole (:func:`pumpfun.exact_in.exact_in_quote`) and sets
  ``min_tokens_out`` to the tokens it buys now less ``slippage_bps`` of them, rounded up.

Compute-unit limits: :data:`SNIPE_COMPUTE_UNITS` and :data:`SELL_COMPUTE_UNITS` (legacy instructions),
:data:`SNIPE_V2_COMPUTE_UNITS` and :data:`SELL_V2_COMPUTE_UNITS` (v2 ones). A pump buy or sell
(its fee-program and event self-CPIs included) takes tens of thousands of units, an idempotent ATA
creation up to about 30,000 more when it creates (Token-2022's is the larger), the wSOL steps a few
thousand each; the limits leave headroom over that sum. The priority fee is ``limit x price``, so the
limit is kept that tight rather than at the 200,000-per-instruction default.
"""

from __future__ import annotations

import base64
import random
from dataclasses import dataclass
from typing import Any, Final

from solders.compute_budget import set_compute_unit_limit, set_compute_unit_price
from solders.hash import Hash
from solders.instruction import Instruction
from solders.message import MessageV0
from solders.pubkey import Pubkey
from solders.signature import Signature
from solders.transaction import VersionedTransaction

from gateway.core.errors import RpcCode, RpcError
from gateway.trades.params import SellParams, SnipeParams
from pumpfun import pda, wsol
from pumpfun.accounts import BondingCurve, Global, decode_bonding_curve, decode_global
from pumpfun.curve import BPS_DENOMINATOR, BuyQuote, FeeRates, SellQuote, buy_quote, fee, max_tokens_for_sol, sell_quote
from pumpfun.exact_in import exact_in_quote
from pumpfun.fees import buyback_fee_recipients, fee_rates, fee_recipients
from pumpfun.ids import PUMP_AMM_PROGRAM_ID, TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID, USDC_MINT, WSOL_MINT
from pumpfun.instructions import (
    BuyArgs,
    SellArgs,
    associated_token_account_instruction,
    buy_instruction,
    sell_instruction,
)
from pumpfun.instructions_v2 import (
    BuyExactQuoteInV2Args,
    BuyExactSolInArgs,
    BuyV2Args,
    SellV2Args,
    buy_exact_quote_in_v2_instruction,
    buy_exact_sol_in_instruction,
    buy_v2_instruction,
    quote_side,
    sell_v2_instruction,
)
from pumpfun.spl import decode_token_account_amount

__all__ = [
    "SELL_COMPUTE_UNITS",
    "SELL_V2_COMPUTE_UNITS",
    "SNIPE_COMPUTE_UNITS",
    "SNIPE_V2_COMPUTE_UNITS",
    "AccountData",
    "Market",
    "SellPlan",
    "SnipePlan",
    "account_data",
    "graduated_pool",
    "market",
    "min_sale_lamports",
    "plan_sell",
    "plan_snipe",
    "refusal",
    "sell_instructions",
    "snipe_instructions",
    "token_balance",
    "unsigned_v0",
]

SNIPE_COMPUTE_UNITS: Final = 150_000
SELL_COMPUTE_UNITS: Final = 120_000
#: A v2 trade on a quote-mint curve moves its quote as tokens and may create two fee accounts on the way.
SNIPE_V2_COMPUTE_UNITS: Final = 240_000
SELL_V2_COMPUTE_UNITS: Final = 200_000
_TOKEN_PROGRAMS: Final = (TOKEN_PROGRAM_ID, TOKEN_2022_PROGRAM_ID)
_QUOTE_NAMES: Final = {USDC_MINT: "USDC"}
_TOKEN_ACCOUNT_MIN: Final = 165


@dataclass(frozen=True, slots=True)
class AccountData:
    owner: Pubkey
    data: bytes


def account_data(value: Any) -> AccountData | None:
    """An account of a ``getMultipleAccounts`` answer (``encoding: base64``); None when it does not exist.
    Raises ValueError for something that is not an account."""
    if value is None:
        return None
    try:
        encoded, encoding = value["data"]
        if encoding != "base64":
            raise ValueError(f"account data in {encoding}, not base64")
        return AccountData(Pubkey.from_string(value["owner"]), base64.b64decode(encoded))
    except (KeyError, TypeError) as exc:
        raise ValueError(f"not an account: {str(value)[:80]}") from exc


@dataclass(frozen=True, slots=True)
class Market:
    """A tradable curve as the node showed it: the mint's token program, the curve and the Global."""

    mint: Pubkey
    token_program: Pubkey
    bonding_curve: Pubkey
    curve: BondingCurve
    global_: Global

    @property
    def rates(self) -> FeeRates:
        return fee_rates(self.global_, self.curve)

    @property
    def wrapped_sol(self) -> bool:
        """The curve's own quote mint is wrapped SOL: it trades through ``buy_v2`` / ``sell_v2``, its quote
        moved as wSOL tokens (a SOL coin, quote mint the default key, trades through the legacy ones)."""
        return self.curve.quote_mint == WSOL_MINT


def refusal(message: str, data: dict[str, Any] | None = None) -> RpcError:
    """A ``-32602`` refusal of a build, with what the caller may want to read off it in ``data``."""
    return RpcError(RpcCode.INVALID_PARAMS, f"Invalid params: {message}", data)


def graduated_pool(mint: Pubkey) -> Pubkey:
    """The canonical PumpSwap pool a completed curve migrates to: index 0, created by the mint's
    ``pool-authority`` PDA, the mint against wSOL (as ``pumpfun.instructions.migrate_accounts``)."""
    return pda.pool_pda(0, pda.pool_authority_pda(mint), mint, WSOL_MINT)


def market(
    mint: Pubkey,
    mint_account: AccountData | None,
    curve_account: AccountData | None,
    global_account: AccountData | None,
) -> Market | RpcError:
    """The tradable curve of ``mint``, or the refusal (``-32602`` naming why; ``-32003`` when the program's
    Global account is missing, which is the node's state, not the caller's mistake)."""
    if mint_account is None:
        return refusal(f"mint {mint} does not exist on this chain")
    if mint_account.owner not in _TOKEN_PROGRAMS:
        return refusal(f"{mint} is not a token mint (its account is owned by {mint_account.owner})")
    address = pda.bonding_curve_pda(mint)
    if curve_account is None:
        return refusal(f"{mint} has no pump.fun bonding curve (no account at its curve PDA {address})")
    try:
        curve = decode_bonding_curve(curve_account.data)
    except ValueError:
        return refusal(f"the account at {mint}'s curve PDA {address} is not a pump.fun bonding curve")
    if curve.complete or curve.virtual_token_reserves == 0:
        pool = graduated_pool(mint)
        return refusal(
            f"the bonding curve of {mint} is complete: the token graduated and now trades on PumpSwap "
            f"({PUMP_AMM_PROGRAM_ID}), pool {pool}; these builders trade bonding curves only",
            {"graduated": True, "pool": str(pool), "amm_program": str(PUMP_AMM_PROGRAM_ID)},
        )
    if not (curve.is_sol_quoted or curve.quote_mint == WSOL_MINT):
        name = _QUOTE_NAMES.get(curve.quote_mint, "a token other than SOL")
        return refusal(
            f"the curve of {mint} is quoted in {name} ({curve.quote_mint}), not SOL: only SOL- and "
            "wrapped-SOL-quoted curves can be traded here",
            {"quote_mint": str(curve.quote_mint)},
        )
    global_ = _global(global_account)
    if isinstance(global_, RpcError):
        return global_
    return Market(mint, mint_account.owner, address, curve, global_)


def _global(account: AccountData | None) -> Global | RpcError:
    where = pda.global_pda()
    if account is None:
        return RpcError(RpcCode.BACKEND_UNAVAILABLE, f"the pump program's Global account ({where}) is not on the node")
    try:
        return decode_global(account.data)
    except ValueError:
        return RpcError(RpcCode.BACKEND_UNAVAILABLE, f"the account at {where} is not the pump program's Global")


def token_balance(account: AccountData | None) -> int:
    """Raw units in a token account (0 when it does not exist). Raises ValueError for another account."""
    if account is None:
        return 0
    if account.owner not in _TOKEN_PROGRAMS or len(account.data) < _TOKEN_ACCOUNT_MIN:
        raise ValueError("not a token account")
    return decode_token_account_amount(account.data)


# --- quotes -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SnipePlan:
    market: Market
    params: SnipeParams
    quote: BuyQuote  # buying ``tokens_out`` at the state read
    max_sol_cost: int  # exact_in: the budget itself, spent whole
    min_tokens_out: int | None = None  # exact_in only

    @property
    def tokens_out(self) -> int:
        return self.quote.token_amount

    @property
    def instruction(self) -> str:
        """The pump instruction the snipe uses."""
        if self.market.wrapped_sol:
            return "buy_exact_quote_in_v2" if self.params.exact_in else "buy_v2"
        return "buy_exact_sol_in" if self.params.exact_in else "buy"

    @property
    def compute_unit_limit(self) -> int:
        return SNIPE_V2_COMPUTE_UNITS if self.market.wrapped_sol else SNIPE_COMPUTE_UNITS

    @property
    def notional_lamports(self) -> int:
        return self.params.amount_lamports


@dataclass(frozen=True, slots=True)
class SellPlan:
    market: Market
    params: SellParams
    quote: SellQuote
    min_sol_output: int

    @property
    def notional_lamports(self) -> int:
        """The gross SOL the curve pays, before the protocol and creator fees."""
        return self.quote.sol_amount

    @property
    def instruction(self) -> str:
        return "sell_v2" if self.market.wrapped_sol else "sell"

    @property
    def compute_unit_limit(self) -> int:
        return SELL_V2_COMPUTE_UNITS if self.market.wrapped_sol else SELL_COMPUTE_UNITS


def plan_snipe(params: SnipeParams, mkt: Market) -> SnipePlan | RpcError:
    if params.exact_in:
        return _plan_exact_in(params, mkt)
    reserves, rates = mkt.curve.reserves, mkt.rates
    tokens = max_tokens_for_sol(reserves, params.amount_lamports, rates)
    if tokens <= 0:
        cheapest = buy_quote(reserves, 1, rates).total_cost
        return refusal(
            f"amount_sol ({params.amount_lamports} lamports) buys no token of {mkt.mint} at the curve's price: "
            f"the smallest buy (1 raw unit) costs {cheapest} lamports, fees included"
        )
    quote = buy_quote(reserves, tokens, rates)
    max_cost = quote.total_cost + quote.total_cost * params.slippage_bps // BPS_DENOMINATOR
    return SnipePlan(mkt, params, quote, max_cost)


def _plan_exact_in(params: SnipeParams, mkt: Market) -> SnipePlan | RpcError:
    """The budget buy: exactly ``amount_sol`` (or one lamport less, the program's fee rounding), for the tokens
    it buys now less ``slippage_bps`` of them (rounded up) at the least."""
    reserves = mkt.curve.reserves
    quote = exact_in_quote(reserves, params.amount_lamports, mkt.rates)
    if quote.token_amount <= 0:
        cheapest = buy_quote(reserves, 1, mkt.rates).total_cost
        return refusal(
            f"amount_sol ({params.amount_lamports} lamports) buys no token of {mkt.mint} at the curve's price: "
            f"the smallest buy (1 raw unit) costs {cheapest} lamports, fees included"
        )
    if quote.token_amount > reserves.real_token_reserves:
        most = buy_quote(reserves, reserves.real_token_reserves, mkt.rates).total_cost
        return refusal(
            f"amount_sol ({params.amount_lamports} lamports) would buy {quote.token_amount} raw units of {mkt.mint}; "
            f"the curve has {reserves.real_token_reserves} left (they cost {most} lamports): with exact_in the "
            "budget must fit what is left",
            {"real_token_reserves": reserves.real_token_reserves, "max_amount_lamports": most},
        )
    kept = BPS_DENOMINATOR - params.slippage_bps
    min_tokens = -(-quote.token_amount * kept // BPS_DENOMINATOR)
    return SnipePlan(mkt, params, quote, params.amount_lamports, min_tokens)


def plan_sell(params: SellParams, mkt: Market, held: int) -> SellPlan | RpcError:
    """``held``: the raw units in the seller's associated token account for the mint (0 without one).

    Checked in order: the amount pays something at all (dust is refused whoever holds it), the wallet
    holds it, the curve's real SOL covers the payout."""
    curve, rates = mkt.curve, mkt.rates
    quote = sell_quote(curve.reserves, params.token_amount, rates)
    if quote.sol_out <= 0:
        return _dust(params, mkt, quote)
    if held < params.token_amount:
        return refusal(
            f"the wallet holds {held} raw units of {mkt.mint}; token_amount {params.token_amount} is more",
            {"held": held},
        )
    if quote.sol_amount > curve.real_sol_reserves:
        return refusal(
            f"the curve of {mkt.mint} holds {curve.real_sol_reserves} lamports; selling {params.token_amount} "
            f"raw units would take {quote.sol_amount}"
        )
    min_out = quote.sol_out - quote.sol_out * params.slippage_bps // BPS_DENOMINATOR
    return SellPlan(mkt, params, quote, min_out)


def min_sale_lamports(rates: FeeRates) -> int | None:
    """The smallest gross payout (lamports before fees) the fees, each rounded up, leave something of;
    None when the fees take everything however large the sale."""
    if rates.total_bps >= BPS_DENOMINATOR:
        return None
    gross = 1
    while gross - fee(gross, rates.protocol_bps) - fee(gross, rates.creator_bps) < 1:
        gross += 1  # at most a few steps: each fee is 1 lamport until gross * bps reaches 10,000
    return gross


def _dust(params: SellParams, mkt: Market, quote: SellQuote) -> RpcError:
    rates, curve = mkt.rates, mkt.curve
    threshold = min_sale_lamports(rates)
    fees = f"the protocol and creator fees ({rates.protocol_bps} + {rates.creator_bps} bps, each rounded up)"
    if threshold is None:
        return refusal(f"token_amount {params.token_amount} pays nothing: {fees} take the whole sale")
    units = ""
    if curve.virtual_sol_reserves > threshold:
        need = -(-threshold * curve.virtual_token_reserves // (curve.virtual_sol_reserves - threshold))
        units = f" (at the curve's price now, at least {need} raw units)"
    return refusal(
        f"token_amount {params.token_amount} sells for {quote.sol_amount} lamports before fees and {fees} "
        f"round that to nothing: a sale must gross at least {threshold} lamports{units}",
        {"min_gross_lamports": threshold},
    )


# --- assembly ---------------------------------------------------------------------------------------


def _recipients(mkt: Market, rng: random.Random) -> tuple[Pubkey, Pubkey]:
    """A fee recipient and a buyback fee recipient from the Global's lists (spread over them, as clients
    do, so that trades do not all write-lock one account)."""
    fees = [k for k in fee_recipients(mkt.global_, mkt.curve) if k != Pubkey.default()]
    buybacks = [k for k in buyback_fee_recipients(mkt.global_) if k != Pubkey.default()]
    return rng.choice(fees), rng.choice(buybacks)


def _budget(units: int, micro_lamports: int) -> list[Instruction]:
    return [set_compute_unit_limit(units), set_compute_unit_price(micro_lamports)]


def _buy(plan: SnipePlan, user: Pubkey, fee_recipient: Pubkey, buyback: Pubkey) -> Instruction:
    """The pump buy of the plan: legacy (``buy`` / ``buy_exact_sol_in``) on a SOL coin, v2 (``buy_v2`` /
    ``buy_exact_quote_in_v2``) on a quote-mint curve."""
    mkt, exact = plan.market, plan.min_tokens_out is not None
    parties = (mkt.mint, user, mkt.curve.creator, fee_recipient, buyback)
    if mkt.wrapped_sol:
        quote = quote_side(mkt.curve.quote_mint)
        if exact:
            args_in = BuyExactQuoteInV2Args(plan.max_sol_cost, plan.min_tokens_out or 0)
            return buy_exact_quote_in_v2_instruction(*parties, quote, mkt.token_program, args_in)
        return buy_v2_instruction(*parties, quote, mkt.token_program, BuyV2Args(plan.tokens_out, plan.max_sol_cost))
    if exact:
        budget = BuyExactSolInArgs(plan.max_sol_cost, plan.min_tokens_out or 0, track_volume=True)
        return buy_exact_sol_in_instruction(*parties, budget, mkt.token_program)
    return buy_instruction(*parties, BuyArgs(plan.tokens_out, plan.max_sol_cost, track_volume=True), mkt.token_program)


def snipe_instructions(plan: SnipePlan, user: Pubkey, rng: random.Random) -> list[Instruction]:
    mkt = plan.market
    fee_recipient, buyback = _recipients(mkt, rng)
    ixs = _budget(plan.compute_unit_limit, plan.params.priority_fee_micro_lamports)
    ixs.append(associated_token_account_instruction(user, user, mkt.mint, mkt.token_program))
    if mkt.wrapped_sol:
        ixs += wsol.wrap_sol_instructions(user, plan.max_sol_cost)
    ixs.append(_buy(plan, user, fee_recipient, buyback))
    if mkt.wrapped_sol:
        ixs.append(wsol.unwrap_sol_instruction(user))
    return ixs


def sell_instructions(plan: SellPlan, user: Pubkey, rng: random.Random) -> list[Instruction]:
    mkt = plan.market
    fee_recipient, buyback = _recipients(mkt, rng)
    parties = (mkt.mint, user, mkt.curve.creator, fee_recipient, buyback)
    ixs = _budget(plan.compute_unit_limit, plan.params.priority_fee_micro_lamports)
    if mkt.wrapped_sol:
        ixs.append(associated_token_account_instruction(user, user, WSOL_MINT, TOKEN_PROGRAM_ID))
        args_v2 = SellV2Args(plan.params.token_amount, plan.min_sol_output)
        ixs.append(sell_v2_instruction(*parties, quote_side(mkt.curve.quote_mint), mkt.token_program, args_v2))
        ixs.append(wsol.unwrap_sol_instruction(user))
    else:
        args = SellArgs(plan.params.token_amount, plan.min_sol_output)
        ixs.append(sell_instruction(*parties, args, mkt.token_program))
    return ixs


def unsigned_v0(payer: Pubkey, instructions: list[Instruction], blockhash: Hash) -> str:
    """The base64 wire form of an unsigned v0 transaction (no lookup tables): its message with one
    all-zero signature per required signer, for the caller to sign (``VersionedTransaction(message, [kp])``)."""
    message = MessageV0.try_compile(payer, instructions, [], blockhash)
    signers = message.header.num_required_signatures
    tx = VersionedTransaction.populate(message, [Signature.default()] * signers)
    return base64.b64encode(bytes(tx)).decode("ascii")
