"""``executeSnipe`` and ``executeSell``: an unsigned pump.fun buy or sell against live curve state, for the
caller's own wallet (its public key is the trader and the fee payer; the service never holds keys).

Planning decoded the params (refused free otherwise); the metering stage took a rate unit and no credits
(``TRADE_BUILD`` is product-priced). Here, in order:

1. **Read** (free): one ``getMultipleAccounts`` at ``processed`` for the mint (its owner is the token
   program), the bonding curve PDA, the pump ``Global`` (fee rates and recipients) and, for a sell, the
   wallet's associated token accounts for the mint under both token programs. A refusal from what was
   read (no curve, a graduated curve, a non-SOL quote, more than held, dust...), a node that fails or
   no SOL/USD rate: the error, nothing charged.
2. **Bill**: the build fee plus the notional share (:mod:`gateway.trades.fees`) at the rate source's
   rate, admitted from the account's lease like any call (``Meter.admit``), or 402 ``-32010``.
3. **Build**: one batch to the node, ``getLatestBlockhash`` (``confirmed``) and the curve again. If the
   node fails, or the curve completed or went away meanwhile, the charge is refunded (a ``refund``
   ledger entry at the next flush, like every refunded call) and the answer is the error. Otherwise the
   unsigned v0 transaction (:mod:`gateway.trades.rules`) and ``fee_credits``, exactly what was charged.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Any

from solders.hash import Hash
from solders.pubkey import Pubkey

from gateway.core.errors import RpcCode, RpcError
from gateway.core.jsonrpc import RpcItem
from gateway.core.methods import CLASS_TIMEOUT_S, MethodClass
from gateway.core.params import node_integer
from gateway.credits.errors import insufficient_credits, payment_required, spend_cap_reached
from gateway.credits.meter import Admission, Meter, Outcome
from gateway.node.http import ChainError, Upstream, UpstreamTimeout, UpstreamUnavailable, rpc_batch, rpc_call
from gateway.pipeline.stages import Call
from gateway.rpc.answers import answer, transport_failure, unpaid
from gateway.trades.fees import TradeFees
from gateway.trades.params import SellParams, SnipeParams
from gateway.trades.rules import (
    AccountData,
    Market,
    account_data,
    market,
    plan_sell,
    plan_snipe,
    sell_instructions,
    snipe_instructions,
    token_balance,
    unsigned_v0,
)
from gateway.trades.sol_usd import RateSource
from pumpfun import pda
from pumpfun.ids import TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID

TIMEOUT_S = CLASS_TIMEOUT_S[MethodClass.TRADE_BUILD]
_ACCOUNTS = {"encoding": "base64", "commitment": "processed"}


class _Read:
    """The accounts of one build: mint, curve, Global and (for a sell) the wallet's token accounts."""

    def __init__(self, accounts: list[AccountData | None]) -> None:
        self.mint, self.curve, self.global_, *self.holdings = accounts


class TradeBuilder:
    """What both builders share: the node reads, the billing and the refund."""

    def __init__(
        self,
        node: Upstream,
        meter: Meter,
        fees: TradeFees,
        rates: RateSource,
        top_up: Callable[[str | None], Mapping[str, Any]],
        rng: random.Random | None = None,
    ) -> None:
        self.node = node
        self.meter = meter
        self.fees = fees
        self.rates = rates
        self.top_up = top_up
        self.rng = rng or random.Random()

    async def _market(self, item: RpcItem, mint: Pubkey, owner: Pubkey | None) -> tuple[_Read, Market] | None:
        """The build's accounts and the curve's market, or None with the item answered (free)."""
        read = await self._read(item, mint, owner)
        if read is None:
            return None
        mkt = market(mint, read.mint, read.curve, read.global_)
        if isinstance(mkt, RpcError):
            item.error = mkt
            return None
        return read, mkt

    async def _read(self, item: RpcItem, mint: Pubkey, owner: Pubkey | None) -> _Read | None:
        """The build's accounts, or None with the item answered by the node's failure (free)."""
        keys = [mint, pda.bonding_curve_pda(mint), pda.global_pda()]
        if owner is not None:
            keys += [pda.associated_token_address(owner, mint, p) for p in (TOKEN_PROGRAM_ID, TOKEN_2022_PROGRAM_ID)]
        try:
            found = await rpc_call(self.node, "getMultipleAccounts", [[str(k) for k in keys], _ACCOUNTS], TIMEOUT_S)
            return _Read([account_data(value) for value in _values(found, len(keys))])
        except ChainError as exc:
            _unavailable(item, f"the node could not read the curve: {exc.message}", charged=False)
        except (UpstreamUnavailable, UpstreamTimeout) as exc:
            transport_failure(item, exc)
        except ValueError as exc:
            _unavailable(item, f"the node's accounts are unreadable ({exc})", charged=False)
        return None

    async def _bill(self, item: RpcItem, call: Call, notional_lamports: int) -> Admission | None:
        """Admit the build's price from the account's credits; None with the item refused (free)."""
        try:
            rate = await self.rates.rate()
        except Exception as exc:  # any source failure: no price, so no build (and no charge)
            item.error = RpcError(RpcCode.BACKEND_UNAVAILABLE, f"{item.method}: no SOL/USD rate to price it: {exc}")
            return None
        price = self.fees.charge(notional_lamports, rate)
        pubkey = call.authenticated().pubkey
        admission = await self.meter.reserve(pubkey, price)
        if admission.ok:
            return admission
        top_up = self.top_up(pubkey)
        if admission.outcome is Outcome.NO_ACCOUNT:
            error = payment_required(top_up)
        elif admission.outcome is Outcome.CAPPED:  # the daily spend cap (docs/api.md)
            error = spend_cap_reached()
        else:
            error = insufficient_credits(price, self.meter.remaining(pubkey), top_up)
        unpaid(item, call, error)
        return None

    async def _latest(self, item: RpcItem, read: _Read, mint: Pubkey) -> tuple[Hash, int] | None:
        """After billing: the blockhash to build on, with the curve checked again (it may have completed);
        None with the item answered by the error (the caller refunds)."""
        calls: list[tuple[str, list[Any]]] = [
            ("getLatestBlockhash", [{"commitment": "confirmed"}]),
            ("getMultipleAccounts", [[str(pda.bonding_curve_pda(mint))], _ACCOUNTS]),
        ]
        try:
            latest, curve = await rpc_batch(self.node, calls, TIMEOUT_S)
            for answer_ in (latest, curve):
                if isinstance(answer_, ChainError):
                    raise answer_
            again = market(mint, read.mint, account_data(_values(curve, 1)[0]), read.global_)
            if isinstance(again, RpcError):
                item.error = RpcError(again.code, f"{again.message}; the build fee was refunded", again.data)
                return None
            value = latest["value"]
            height = node_integer(value["lastValidBlockHeight"])
            if height is None:
                raise ValueError("lastValidBlockHeight is not a block height")
            return Hash.from_string(value["blockhash"]), height
        except ChainError as exc:
            _unavailable(item, f"the node failed to give a blockhash: {exc.message}", charged=True)
        except (UpstreamUnavailable, UpstreamTimeout) as exc:
            transport_failure(item, exc)
        except (ValueError, KeyError, TypeError) as exc:
            _unavailable(item, f"the node's blockhash answer is unreadable ({exc})", charged=True)
        return None

    async def _build(
        self,
        item: RpcItem,
        call: Call,
        read: _Read,
        mkt: Market,
        notional_lamports: int,
        result: Callable[[Hash, int], dict[str, Any]],
    ) -> None:
        """Bill, then build with the latest blockhash; refund when no transaction comes of it."""
        admission = await self._bill(item, call, notional_lamports)
        if admission is None:
            return
        charged = False
        try:
            latest = await self._latest(item, read, mkt.mint)
            if latest is not None:
                answer(item, {**result(*latest), "fee_credits": admission.price})
                charged = True
        finally:  # an error, our own failure or a caller gone away: no transaction, no charge
            self.meter.complete(admission, item.method, call.usage_id(item.index), refunded=not charged)


class ExecuteSnipe(TradeBuilder):
    async def __call__(self, item: RpcItem, call: Call) -> None:
        params = item.parsed(SnipeParams)
        user = Pubkey.from_string(call.authenticated().pubkey)
        found = await self._market(item, params.mint, None)
        if found is None:
            return
        read, mkt = found
        plan = plan_snipe(params, mkt)
        if isinstance(plan, RpcError):
            item.error = plan
            return

        def result(blockhash: Hash, last_valid: int) -> dict[str, Any]:
            tx = unsigned_v0(user, snipe_instructions(plan, user, self.rng), blockhash)
            built: dict[str, Any] = {
                "unsigned_tx_base64": tx,
                "tokens_out": plan.tokens_out,
                "max_sol_cost_lamports": plan.max_sol_cost,
                "sol_cost_lamports": plan.quote.total_cost,
                "mint": str(mkt.mint),
                "bonding_curve": str(mkt.bonding_curve),
                "token_program": str(mkt.token_program),
                "quote": "wSOL" if mkt.wrapped_sol else "SOL",
                "instruction": plan.instruction,
                "compute_unit_limit": plan.compute_unit_limit,
                "last_valid_block_height": last_valid,
            }
            if plan.min_tokens_out is not None:
                built["min_tokens_out"] = plan.min_tokens_out
            return built

        await self._build(item, call, read, mkt, plan.notional_lamports, result)


class ExecuteSell(TradeBuilder):
    async def __call__(self, item: RpcItem, call: Call) -> None:
        params = item.parsed(SellParams)
        user = Pubkey.from_string(call.authenticated().pubkey)
        found = await self._market(item, params.mint, user)
        if found is None:
            return
        read, mkt = found
        try:
            held = token_balance(read.holdings[0 if mkt.token_program == TOKEN_PROGRAM_ID else 1])
        except ValueError:
            held = 0  # not a token account at the ATA address (cannot happen on a real chain): holds none
        plan = plan_sell(params, mkt, held)
        if isinstance(plan, RpcError):
            item.error = plan
            return

        def result(blockhash: Hash, last_valid: int) -> dict[str, Any]:
            tx = unsigned_v0(user, sell_instructions(plan, user, self.rng), blockhash)
            return {
                "unsigned_tx_base64": tx,
                "sol_out_lamports": plan.quote.sol_out,
                "min_sol_output_lamports": plan.min_sol_output,
                "gross_sol_lamports": plan.quote.sol_amount,
                "token_amount": params.token_amount,
                "mint": str(mkt.mint),
                "bonding_curve": str(mkt.bonding_curve),
                "token_program": str(mkt.token_program),
                "quote": "wSOL" if mkt.wrapped_sol else "SOL",
                "instruction": plan.instruction,
                "compute_unit_limit": plan.compute_unit_limit,
                "last_valid_block_height": last_valid,
            }

        await self._build(item, call, read, mkt, plan.notional_lamports, result)


def _values(found: Any, count: int) -> list[Any]:
    """The ``value`` list of a ``getMultipleAccounts`` answer, checked to hold ``count`` entries."""
    values = found.get("value") if isinstance(found, dict) else None
    if not isinstance(values, list) or len(values) != count:
        raise ValueError(f"expected {count} accounts from getMultipleAccounts")
    return values


def _unavailable(item: RpcItem, what: str, charged: bool) -> None:
    after = "the build fee was refunded" if charged else "nothing was charged"
    item.error = RpcError(RpcCode.BACKEND_UNAVAILABLE, f"{item.method}: {what}; {after}")


__all__ = ["ExecuteSell", "ExecuteSnipe", "TradeBuilder"]
