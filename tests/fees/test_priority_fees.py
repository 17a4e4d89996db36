"""suggestPriorityFee and getPriorityFeeEstimate through a running gateway, on the real devnode.

Fees come from real signed transactions paying a compute-unit price, one per slot. Every expected
value is computed here, independently, from the node's own ``getRecentPrioritizationFees`` answer
fetched around the gateway's call (the window moves every 100 ms slot: a comparison counts only when
the node's window was the same before and after the call). Refusals are free; an upstream failure is
an error and refunded, never a zero.
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Awaitable, Callable
from typing import Any

import base58
import pytest
from solders.compute_budget import set_compute_unit_price
from solders.hash import Hash
from solders.keypair import Keypair
from solders.message import Message, MessageV0
from solders.pubkey import Pubkey
from solders.transaction import Transaction, VersionedTransaction

from tests.feed import node_rpc
from tests.sending.conftest import FailingRelay, charged
from tests.sending.helpers import Caller, b64, latest_blockhash, signed, transfer_ix

URGENCY = {"low": 25, "medium": 50, "high": 75, "critical": 90}
LEVELS = {"low": 25, "medium": 50, "high": 75, "veryHigh": 95}
ESTIMATE = {"min": 0, "low": 25, "medium": 50, "high": 75, "veryHigh": 95, "unsafeMax": 100}
PRICES = [1_000 * (i + 1) for i in range(20)]  # micro-lamports per CU, one paying transaction per slot


# -- the chain --------------------------------------------------------------------------------------


async def node_fees(devnode_url: str, accounts: list[str] | None = None) -> list[int]:
    window = await node_rpc(devnode_url, "getRecentPrioritizationFees", [accounts] if accounts else [])
    return [entry["prioritizationFee"] for entry in window]


async def pay_slots(devnode_url: str, payer: Keypair, to: Pubkey, prices: list[int]) -> None:
    """One transaction per slot, each paying its compute-unit price and writing ``to``."""
    blockhash = await latest_blockhash(devnode_url)
    for price in prices:
        tx = signed(payer, [set_compute_unit_price(price), transfer_ix(payer, to, 1_000_000)], blockhash)
        await node_rpc(devnode_url, "sendTransaction", [b64(tx), {"encoding": "base64", "skipPreflight": True}])
        await asyncio.sleep(0.12)  # the next slot
    await asyncio.sleep(0.25)  # the last one landed


async def quiet_window(devnode_url: str) -> None:
    """Until no slot of the global window paid a fee (other tests' fees moved out of it)."""
    deadline = time.monotonic() + 30
    while any(await node_fees(devnode_url)):
        assert time.monotonic() < deadline, "the devnode's fee window never emptied"
        await asyncio.sleep(0.5)


# -- what the answers must be, computed here ----------------------------------------------------------


def nearest_rank(values: list[int], pct: int) -> int:
    if not values:
        return 0
    ordered = sorted(values)
    return ordered[max(1, -(-pct * len(ordered) // 100)) - 1]


def sample(fees: list[int], scoped: bool) -> tuple[list[int], str]:
    paid = [fee for fee in fees if fee > 0]
    return (paid, "paid_slots") if scoped and len(paid) >= 3 else (fees, "all_slots")


def expected_suggestion(fees: list[int], urgency: str, scoped: bool) -> dict[str, Any]:
    used, basis = sample(fees, scoped)
    levels: dict[str, Any] = {name: nearest_rank(used, pct) for name, pct in LEVELS.items()}
    levels |= {"sample_count": len(fees), "paid_slot_count": sum(1 for f in fees if f > 0), "basis": basis}
    return {
        "suggested_fee_microlamports": nearest_rank(used, URGENCY[urgency]),
        "urgency": urgency,
        "all_levels": levels,
        "scoped_to_accounts": scoped,
    }


def expected_estimate(fees: list[int], level: str, scoped: bool, include_all: bool) -> dict[str, Any]:
    used, _ = sample(fees, scoped)
    result: dict[str, Any] = {"priorityFeeEstimate": nearest_rank(used, ESTIMATE[level])}
    if include_all:
        result["priorityFeeLevels"] = {name: nearest_rank(used, pct) for name, pct in ESTIMATE.items()}
    return result


async def against_the_node(
    devnode_url: str,
    accounts: list[str] | None,
    ask: Callable[[], Awaitable[Any]],
    expect: Callable[[list[int]], Any],
) -> Any:
    """The gateway's answer, checked against ``expect`` of the node's window around it."""
    for _ in range(30):
        before = await node_fees(devnode_url, accounts)
        got = await ask()
        after = await node_fees(devnode_url, accounts)
        if sorted(before) == sorted(after):
            assert got == expect(before)
            return got
        await asyncio.sleep(0.03)
    raise AssertionError("the node's fee window moved during every attempt")


# -- suggestPriorityFee -----------------------------------------------------------------------------


async def test_both_param_forms_answer_the_global_window(caller: Caller, payer: Keypair, devnode_url: str) -> None:
    await pay_slots(devnode_url, payer, Keypair().pubkey(), PRICES)
    for params, urgency in [(["high"], "high"), ([{"urgency": "critical"}], "critical"), ([], "medium")]:
        result = await against_the_node(
            devnode_url,
            None,
            lambda params=params: caller.result("suggestPriorityFee", params),
            lambda fees, urgency=urgency: expected_suggestion(fees, urgency, scoped=False),
        )
        levels = result["all_levels"]
        assert levels["low"] <= levels["medium"] <= levels["high"] <= levels["veryHigh"]
        assert levels["veryHigh"] > 0 and levels["paid_slot_count"] >= 3 and levels["basis"] == "all_slots"
        assert all(isinstance(levels[k], int) for k in LEVELS) and not result["scoped_to_accounts"]
    doc, cost = await charged(caller, "suggestPriorityFee", ["low"])
    assert "result" in doc and cost == 5, doc


async def test_accounts_with_three_or_more_paid_slots_use_only_those(
    caller: Caller, payer: Keypair, devnode_url: str
) -> None:
    # the node's window gives a slot's block minimum too: another test's paying slots (70,000 and 90,000 in
    # the next one, which ran first in a shuffled run) would count as this account's
    await quiet_window(devnode_url)
    hot = Keypair().pubkey()
    await pay_slots(devnode_url, payer, hot, PRICES)
    accounts = [str(hot)]
    result = await against_the_node(
        devnode_url,
        accounts,
        lambda: caller.result("suggestPriorityFee", [{"urgency": "low", "accounts": accounts}]),
        lambda fees: expected_suggestion(fees, "low", scoped=True),
    )
    levels = result["all_levels"]
    assert levels["basis"] == "paid_slots" and levels["paid_slot_count"] >= 3 and result["scoped_to_accounts"]
    assert 0 < levels["low"] < levels["medium"] < levels["high"] < levels["veryHigh"] <= max(PRICES)
    assert result["suggested_fee_microlamports"] == levels["low"]


async def test_accounts_with_fewer_than_three_paid_slots_use_every_slot(
    caller: Caller, payer: Keypair, devnode_url: str
) -> None:
    await quiet_window(devnode_url)
    cold = Keypair().pubkey()
    await pay_slots(devnode_url, payer, cold, [70_000, 90_000])
    accounts = [str(cold)]
    result = await against_the_node(
        devnode_url,
        accounts,
        lambda: caller.result("suggestPriorityFee", [{"accounts": accounts}]),
        lambda fees: expected_suggestion(fees, "medium", scoped=True),
    )
    levels = result["all_levels"]
    assert (levels["basis"], levels["paid_slot_count"]) == ("all_slots", 2)
    assert result["suggested_fee_microlamports"] == 0 and result["urgency"] == "medium"  # zero is an answer here


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("suggestPriorityFee", [{"accounts": [str(Pubkey.new_unique()) for _ in range(129)]}]),
        ("suggestPriorityFee", [{"urgency": "asap"}]),
        ("getPriorityFeeEstimate", [{"accountKeys": [str(Pubkey.new_unique()) for _ in range(129)]}]),
        ("getPriorityFeeEstimate", [{"transaction": "bm90IGEgdHg=", "options": {"transactionEncoding": "base64"}}]),
        ("getPriorityFeeEstimate", [{"options": {"priorityLevel": "Extreme"}}]),
    ],
    ids=["129-accounts", "bad-urgency", "129-account-keys", "bad-transaction", "bad-level"],
)
async def test_bad_params_are_refused_free(caller: Caller, method: str, params: list[Any]) -> None:
    doc, cost = await charged(caller, method, params)
    assert doc["error"]["code"] == -32602 and cost == 0, doc


# -- getPriorityFeeEstimate -------------------------------------------------------------------------


async def test_estimate_for_account_keys(caller: Caller, payer: Keypair, devnode_url: str) -> None:
    hot = Keypair().pubkey()
    await pay_slots(devnode_url, payer, hot, PRICES)
    keys = [str(hot)]
    for options, level, include_all in [
        ({}, "medium", False),
        ({"priorityLevel": "High"}, "high", False),
        ({"priorityLevel": "VeryHigh", "includeAllPriorityFeeLevels": True}, "veryHigh", True),
    ]:
        result = await against_the_node(
            devnode_url,
            keys,
            lambda options=options: caller.result(
                "getPriorityFeeEstimate", [{"accountKeys": keys, "options": options}]
            ),
            lambda fees, level=level, include_all=include_all: expected_estimate(fees, level, True, include_all),
        )
        assert result["priorityFeeEstimate"] > 0
    levels = result["priorityFeeLevels"]
    assert list(levels) == list(ESTIMATE)
    assert levels["min"] > 0  # paid slots only
    assert (
        levels["min"] <= levels["low"] < levels["medium"] < levels["high"] < levels["veryHigh"] <= levels["unsafeMax"]
    )
    doc, cost = await charged(caller, "getPriorityFeeEstimate", [{"accountKeys": keys}])
    assert "result" in doc and cost == 1, doc


def unsigned_tx(to: Pubkey, blockhash: Hash, v0: bool) -> tuple[bytes, list[str]]:
    """An unsigned transfer from a fresh payer to ``to``: its bytes and its writable keys."""
    payer = Keypair()
    ixs = [set_compute_unit_price(1), transfer_ix(payer, to, 1)]
    if v0:
        message = MessageV0.try_compile(payer.pubkey(), ixs, [], blockhash)
        return bytes(VersionedTransaction.populate(message, [])), [str(payer.pubkey()), str(to)]
    legacy = Message.new_with_blockhash(ixs, payer.pubkey(), blockhash)
    return bytes(Transaction.new_unsigned(legacy)), [str(payer.pubkey()), str(to)]


@pytest.mark.parametrize("encoding", ["base64", "base58"])
async def test_estimate_for_a_transaction_uses_its_writable_accounts(
    caller: Caller, payer: Keypair, devnode_url: str, encoding: str
) -> None:
    hot = Keypair().pubkey()
    await pay_slots(devnode_url, payer, hot, PRICES)
    raw, writable = unsigned_tx(hot, await latest_blockhash(devnode_url), v0=encoding == "base64")
    if encoding == "base64":
        params = [{"transaction": base64.b64encode(raw).decode(), "options": {"transactionEncoding": "base64"}}]
    else:
        params = [{"transaction": base58.b58encode(raw).decode()}]  # the default encoding
    params[0]["options"] = {**params[0].get("options", {}), "includeAllPriorityFeeLevels": True}
    result = await against_the_node(
        devnode_url,
        writable,
        lambda: caller.result("getPriorityFeeEstimate", params),
        lambda fees: expected_estimate(fees, "medium", True, True),
    )
    assert result["priorityFeeEstimate"] == result["priorityFeeLevels"]["medium"] > 0


# -- the node failing ---------------------------------------------------------------------------------


FEE_CALLS = [
    ("suggestPriorityFee", ["high"]),
    ("getPriorityFeeEstimate", [{"accountKeys": [str(Pubkey.new_unique())]}]),
]


@pytest.mark.parametrize(("method", "params"), FEE_CALLS, ids=["suggest", "estimate"])
async def test_a_node_error_is_an_error_and_refunded(
    relayed_caller: Caller, relay: FailingRelay, method: str, params: list[Any]
) -> None:
    relay.fail_on = b"getRecentPrioritizationFees"
    doc, cost = await charged(relayed_caller, method, params)
    assert "result" not in doc and doc["error"]["code"] == -32003 and "Node is behind" in doc["error"]["message"], doc
    assert cost == 0  # refunded


@pytest.mark.parametrize(("method", "params"), FEE_CALLS, ids=["suggest", "estimate"])
async def test_a_node_cut_off_or_unreachable_is_an_error_and_refunded(
    relayed_caller: Caller, relay: FailingRelay, method: str, params: list[Any]
) -> None:
    _, _, before = await relayed_caller.rpc("getSlot", [])
    relay.cut = True  # the request reaches the "node", the answer is lost
    _, doc, after = await relayed_caller.rpc(method, params)
    assert doc["error"]["code"] == -32003 and "result" not in doc, doc  # a JSON-RPC error, as the send methods'
    assert after == before
    await relay.stop()  # nothing listens any more
    _, doc, after = await relayed_caller.rpc(method, params)
    assert doc["error"]["code"] == -32003 and str(relay.port) not in str(doc), doc
    assert after == before
