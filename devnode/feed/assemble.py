"""Turning an assembled `Tx` into an `InjectedTransaction`: compute-budget instructions, a signed v0
message against the chain's blockhash, the rendered logs and inner instructions, the fee, the account
writes and the token balances before and after.
"""

from __future__ import annotations

import math
from typing import Any, Final

from solders.account import Account
from solders.compute_budget import set_compute_unit_limit, set_compute_unit_price
from solders.hash import Hash
from solders.message import MessageV0
from solders.pubkey import Pubkey
from solders.transaction import VersionedTransaction

from devnode.feed.state import RENT_EPOCH_EXEMPT, FeedState, Tx
from devnode.injected import InjectedTransaction
from pumpfun import cpi, pda, spl
from pumpfun.accounts import BONDING_CURVE_ACCOUNT_SIZE, BondingCurve, encode_bonding_curve, encode_global
from pumpfun.ids import PUMP_PROGRAM_ID, SYSTEM_PROGRAM_ID
from pumpfun.trace import Call, render_trace, token_balance

_SIGNATURE_FEE: Final = 5_000
_CU_LIMITS: Final = (72_000, 100_000, 120_000, 150_000, 200_000, 250_000, 300_000, 400_000, 600_000, 1_400_000)
_MAX_SEEN_SIGNATURES: Final = 50_000


def _total_units(call: Call) -> int:
    return call.units + sum(_total_units(c) for c in call.body if isinstance(c, Call))


def _system_account(lamports: int) -> Account:
    return Account(lamports, b"", SYSTEM_PROGRAM_ID, False, RENT_EPOCH_EXEMPT)


def _curve_account(curve: BondingCurve) -> Account:
    lamports = spl.rent_exempt_minimum(BONDING_CURVE_ACCOUNT_SIZE)
    if curve.is_sol_quoted:
        lamports += curve.real_sol_reserves
    return Account(lamports, encode_bonding_curve(curve), PUMP_PROGRAM_ID, False, RENT_EPOCH_EXEMPT)


def _compile(state: FeedState, tx: Tx, blockhash: Hash, limit: int, price: int) -> VersionedTransaction:
    while True:
        ixs = [set_compute_unit_limit(limit), set_compute_unit_price(price), *tx.instructions]
        message = MessageV0.try_compile(tx.payer.pubkey(), ixs, [], blockhash)
        signed = VersionedTransaction(message, tx.signers)
        if signed.signatures[0] not in state.seen:
            return signed
        limit -= 1  # an identical message was already sent against this blockhash: make it unique


def finish(state: FeedState, tx: Tx, blockhash: Hash) -> InjectedTransaction:
    needed = 300 + sum(_total_units(c) for c in tx.calls)
    candidates = [x for x in _CU_LIMITS if x >= needed * 1.1] or [_CU_LIMITS[-1]]
    limit = state.rng.choice(candidates[:3])
    price = int(round(10 ** state.rng.uniform(3.0, 6.5), -2))
    signed = _compile(state, tx, blockhash, limit, price)
    message = signed.message
    limit = int.from_bytes(bytes(message.instructions[0].data)[1:5], "little")
    keys = list(message.account_keys)
    trace = render_trace([cpi.compute_unit_limit(limit), cpi.compute_unit_price(price), *tx.calls], keys, limit)
    fee = _SIGNATURE_FEE * len(signed.signatures) + math.ceil(limit * price / 1_000_000)

    writes: list[tuple[Pubkey, Account]] = []
    if not state.global_written:
        global_data = encode_global(state.pump_global)
        global_account = Account(
            spl.rent_exempt_minimum(len(global_data)), global_data, PUMP_PROGRAM_ID, False, RENT_EPOCH_EXEMPT
        )
        writes.append((pda.global_pda(), global_account))
        state.global_written = True
    writes += list(tx.extra.items())
    writes += [(address, _curve_account(curve)) for address, curve in tx.curves.items()]
    writes += [(address, state.tokens[address].to_account()) for address in tx.tokens if address in state.tokens]
    writes += [(pubkey, _system_account(state.lamports[pubkey])) for pubkey in tx.wallets if state.lamports[pubkey]]

    index_of = {key: i for i, key in enumerate(keys)}
    pre: list[dict[str, Any]] = []
    post: list[dict[str, Any]] = []
    for address, before in tx.tokens.items():
        token = state.tokens.get(address)
        if token is None or address not in index_of:
            continue
        i = index_of[address]
        if before is not None:
            pre.append(token_balance(i, token.mint, token.owner, token.program, before, token.decimals))
        post.append(token_balance(i, token.mint, token.owner, token.program, token.amount, token.decimals))
    pre.sort(key=lambda b: int(b["accountIndex"]))
    post.sort(key=lambda b: int(b["accountIndex"]))

    # The chain debits the fee after applying the writes (devnode/injected.py): follow it.
    state.debit(tx.payer.pubkey(), fee)
    state.seen[signed.signatures[0]] = None
    if len(state.seen) > _MAX_SEEN_SIGNATURES:
        del state.seen[next(iter(state.seen))]
    for mint in tx.forget_mints:
        state.forget(mint)
    state.counts[tx.kind] += 1
    return InjectedTransaction(
        transaction=signed,
        log_messages=trace.log_messages,
        inner_instructions=trace.inner_instructions,
        account_writes=writes,
        compute_units_consumed=trace.compute_units_consumed,
        fee=fee,
        pre_token_balances=pre,
        post_token_balances=post,
    )
