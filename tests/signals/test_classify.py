"""The signal rules (gateway.signals.rules.classify) over real blocks of a feed devnode.

What each signal should say is established apart from the classifier: from the signed top-level
instructions (their discriminators and account lists), from the accounts the chain holds now (mint
owners, bonding curves, pools), and from the `Program data:` log lines the pump program wrote.
"""

from __future__ import annotations

import base64
import copy
import re
from collections import Counter
from typing import Any

import base58
from solders.pubkey import Pubkey

from gateway.signals.rules import SignalEvent, SignalRules, classify, classify_block
from gateway.signals.tx_events import signers
from pumpfun import pda
from pumpfun.accounts import decode_bonding_curve, decode_pool
from pumpfun.events import EVENT_IX_TAG_LE, CompleteEvent, Event, TradeEvent, decode_program_data_log
from pumpfun.ids import PUMP_AMM_PROGRAM_ID, PUMP_PROGRAM_ID, TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID, WSOL_MINT
from pumpfun.instructions import MIGRATE_DISCRIMINATOR, CreateArgs, CreateV2Args, decode_pump_instruction
from tests.signals.conftest import Recorded

PUMP, AMM, WSOL = str(PUMP_PROGRAM_ID), str(PUMP_AMM_PROGRAM_ID), str(WSOL_MINT)


def signature(tx: dict[str, Any]) -> str:
    return str(tx["transaction"]["signatures"][0])


def pump_instructions(tx: dict[str, Any]) -> list[tuple[list[str], bytes]]:
    """The top-level pump instructions: (their accounts, their data)."""
    message = tx["transaction"]["message"]
    keys = message["accountKeys"]
    return [
        ([keys[i] for i in ix["accounts"]], base58.b58decode(ix["data"]))
        for ix in message["instructions"]
        if keys[ix["programIdIndex"]] == PUMP
    ]


def logged_events(tx: dict[str, Any]) -> list[Event]:
    """The events of the `Program data:` log lines (the feed's programs log every event)."""
    return [decode_program_data_log(line) for line in tx["meta"]["logMessages"] if line.startswith("Program data:")]


def logged_trades(tx: dict[str, Any]) -> list[TradeEvent]:
    return [e for e in logged_events(tx) if isinstance(e, TradeEvent)]


def all_signals(recorded: Recorded, rules: SignalRules) -> list[SignalEvent]:
    return [e for slot, block in sorted(recorded.blocks.items()) for e in classify_block(block, slot, rules)]


async def test_new_pairs_say_what_the_creates_and_the_chain_hold(recorded_chain: Recorded) -> None:
    expected: dict[str, tuple[str, str, str, str | None]] = {}  # signature -> (curve type, mint, user, quote)
    for _, tx in recorded_chain.transactions():
        for accounts, data in pump_instructions(tx):
            args = decode_pump_instruction(data)
            if isinstance(args, CreateArgs):
                expected[signature(tx)] = ("classic", accounts[0], accounts[7], None)
            elif isinstance(args, CreateV2Args):
                expected[signature(tx)] = ("v2", accounts[0], accounts[5], accounts[16] if len(accounts) > 16 else None)
    pairs = [e for e in all_signals(recorded_chain, SignalRules()) if e.kind == "newPair"]
    assert {e.signature for e in pairs} == set(expected) and len(pairs) == len(expected)
    assert {e.curve_type for e in pairs} == {"classic", "v2"}
    node = recorded_chain.node
    for event in pairs:
        curve_type, mint, user, quote_account = expected[event.signature]
        assert event.block_time == recorded_chain.blocks[event.slot]["blockTime"]
        assert (event.program, event.curve_type, event.mint, event.complete) == (PUMP, curve_type, mint, False)
        mint_owner = (await node.account(mint))["owner"]
        assert mint_owner == str(TOKEN_PROGRAM_ID if curve_type == "classic" else TOKEN_2022_PROGRAM_ID)
        curve_address = str(pda.bonding_curve_pda(Pubkey.from_string(mint)))
        curve = decode_bonding_curve(base64.b64decode((await node.account(curve_address))["data"][0]))
        assert event.accounts[:3] == (mint, curve_address, user) and str(curve.creator) in event.accounts
        if curve_type == "classic":
            assert event.quote_asset == "SOL" and curve.quote_mint == Pubkey.default()
        else:  # the curve's quote mint, wrapped SOL for the default one
            assert event.quote_asset == (WSOL if curve.quote_mint == Pubkey.default() else str(curve.quote_mint))
            assert event.quote_asset == (quote_account or WSOL)
    quotes = Counter(e.quote_asset for e in pairs if e.curve_type == "v2")
    assert len(quotes) == 2  # wrapped SOL and USDC


async def test_a_migrate_is_a_graduation_and_its_pool_no_new_pair(recorded_chain: Recorded) -> None:
    migrates = {
        signature(tx): accounts
        for _, tx in recorded_chain.transactions()
        for accounts, data in pump_instructions(tx)
        if data[:8] == MIGRATE_DISCRIMINATOR
    }
    signals = all_signals(recorded_chain, SignalRules())
    graduations = [e for e in signals if e.kind == "graduation"]
    assert {e.signature for e in graduations} == set(migrates) and len(graduations) == len(migrates) >= 1
    for event in graduations:
        accounts = migrates[event.signature]
        mint, curve_address, pool = accounts[2], accounts[3], accounts[9]
        assert (event.program, event.mint, event.complete, event.quote_asset) == (PUMP, mint, True, WSOL)
        assert event.accounts[:3] == (mint, curve_address, pool)
        curve = decode_bonding_curve(base64.b64decode((await recorded_chain.node.account(curve_address))["data"][0]))
        pool_account = await recorded_chain.node.account(pool)
        assert curve.complete and pool_account["owner"] == str(PUMP_AMM_PROGRAM_ID)
        assert str(decode_pool(base64.b64decode(pool_account["data"][0])).base_mint) == mint
        assert event.sol_amount is not None and event.sol_amount > 80 * 10**9  # a completed curve's SOL
    assert not [e for e in signals if e.program == AMM]  # the feed's pools are all graduations


async def test_large_swaps_are_the_trades_at_or_over_the_threshold(recorded_chain: Recorded) -> None:
    trades = [(slot, tx, t) for slot, tx in recorded_chain.transactions() for t in logged_trades(tx)]
    sizes = sorted(t.sol_amount for _, _, t in trades)
    threshold = sizes[len(sizes) // 2]
    expected = Counter(
        (signature(tx), str(t.mint), t.sol_amount, t.is_buy) for _, tx, t in trades if t.sol_amount >= threshold
    )
    rules = SignalRules(large_swap_lamports=threshold)
    swaps = [e for e in all_signals(recorded_chain, rules) if e.kind == "largeSwap"]
    assert Counter((e.signature, e.mint, e.sol_amount, e.side == "buy") for e in swaps) == expected
    assert 0 < len(swaps) < len(trades)
    sides = {e.side for e in swaps}
    assert sides <= {"buy", "sell"} and "buy" in sides
    for event in swaps:
        tx = next(tx for _, tx, _ in trades if signature(tx) == event.signature)
        payer = tx["transaction"]["message"]["accountKeys"][0]
        assert event.program == PUMP and event.quote_asset == "SOL" and event.curve_type is None
        assert event.accounts == (event.mint, str(pda.bonding_curve_pda(Pubkey.from_string(str(event.mint)))), payer)
        completes = any(isinstance(e, CompleteEvent) and str(e.mint) == event.mint for e in logged_events(tx))
        assert event.complete is completes


async def test_wallet_activity_is_each_transaction_a_watched_wallet_signed(recorded_chain: Recorded) -> None:
    transactions = recorded_chain.transactions()
    payers = Counter(tx["transaction"]["message"]["accountKeys"][0] for _, tx in transactions if logged_trades(tx))
    wallet, _ = payers.most_common(1)[0]
    signed = {
        signature(tx): tx
        for _, tx in transactions
        if wallet in signers(tx) and f"Program {PUMP} invoke [1]" in tx["meta"]["logMessages"]
    }
    rules = SignalRules(wallets=frozenset({wallet}))
    activity = [e for e in all_signals(recorded_chain, rules) if e.kind == "walletActivity"]
    assert sorted(e.signature for e in activity) == sorted(signed)  # one per transaction
    for event in activity:
        assert event.program == PUMP and event.accounts[0] == wallet
        trades = [t for t in logged_trades(signed[event.signature]) if str(t.user) == wallet]
        if trades:
            side = "buy" if trades[0].is_buy else "sell"
            assert (event.mint, event.sol_amount, event.side) == (str(trades[0].mint), trades[0].sol_amount, side)
        else:
            assert event.side is None and event.sol_amount is None
    assert not [e for e in all_signals(recorded_chain, SignalRules()) if e.kind == "walletActivity"]


_INVOKE = re.compile(r"^Program (\S+) invoke \[\d+\]$")
_SUCCESS = re.compile(r"^Program (\S+) success$")


def without_self_cpis(tx: dict[str, Any], logs_too: bool) -> dict[str, Any]:
    """The transaction without its emit_cpi self-CPIs: as a program that only logs its events would
    make it (``logs_too``: their invoke lines go as well), or as a node that left them out."""
    out = copy.deepcopy(tx)
    for group in out["meta"]["innerInstructions"]:
        group["instructions"] = [
            ix for ix in group["instructions"] if not base58.b58decode(ix["data"]).startswith(EVENT_IX_TAG_LE)
        ]
    if logs_too:
        kept: list[str] = []
        stack: list[tuple[str, bool]] = []  # (program, dropped: a self-CPI or inside one)
        for line in out["meta"]["logMessages"]:
            invoke, success = _INVOKE.match(line), _SUCCESS.match(line)
            dropping = bool(stack) and stack[-1][1]
            if invoke is not None:
                self_cpi = bool(stack) and stack[-1][0] == invoke.group(1)
                stack.append((invoke.group(1), dropping or self_cpi))
                dropping = stack[-1][1]
            elif success is not None:
                dropping = stack.pop()[1]
            if not dropping:
                kept.append(line)
        out["meta"]["logMessages"] = kept
    return out


def logs_stripped(tx: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(tx)
    out["meta"]["logMessages"] = [line for line in out["meta"]["logMessages"] if not line.startswith("Program data:")]
    return out


async def test_events_are_read_from_cpi_or_logs_alike_and_once(recorded_chain: Recorded) -> None:
    rules = SignalRules(large_swap_lamports=1, wallets=frozenset())
    counted = 0
    for slot, tx in recorded_chain.transactions():
        full = classify(tx, slot, 1, rules)
        assert classify(without_self_cpis(tx, logs_too=True), slot, 1, rules) == full
        assert classify(without_self_cpis(tx, logs_too=False), slot, 1, rules) == full
        assert classify(logs_stripped(tx), slot, 1, rules) == full
        counted += len(full)
    assert counted > len(recorded_chain.blocks)


async def test_failed_transactions_and_unwatched_programs_emit_nothing(recorded_chain: Recorded) -> None:
    rules = SignalRules(large_swap_lamports=1)
    creates = [(slot, tx) for slot, tx in recorded_chain.transactions() if classify(tx, slot, None, rules)]
    assert creates
    for slot, tx in creates:
        failed = copy.deepcopy(tx)
        failed["meta"]["err"] = {"InstructionError": [2, {"Custom": 6001}]}
        assert classify(failed, slot, None, rules) == []
        other = SignalRules(programs=frozenset({str(TOKEN_PROGRAM_ID)}), large_swap_lamports=1)
        assert classify(tx, slot, None, other) == []
