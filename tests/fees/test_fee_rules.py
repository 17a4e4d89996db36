"""Priority-fee estimates, the pure part: percentiles, the paid-slot rule, the result shapes, and the
parameter rules of suggestPriorityFee and getPriorityFeeEstimate (refused free before billing)."""

from __future__ import annotations

import base64
from typing import Any

import base58
import pytest
from solders.hash import Hash
from solders.keypair import Keypair
from solders.message import Message, MessageV0
from solders.pubkey import Pubkey
from solders.system_program import TransferParams, transfer
from solders.transaction import Transaction, VersionedTransaction

from gateway.core.fees import FeeQuery, estimate, fee_sample, percentile, slot_fees, suggestion
from gateway.core.jsonrpc import RpcItem
from gateway.core.transactions import writable_accounts
from tests.methods import planned

FEE_METHODS = ("suggestPriorityFee", "getPriorityFeeEstimate")
KEY = str(Pubkey.new_unique())


def plan(method: str, params: Any) -> RpcItem:
    return planned(method, params, *FEE_METHODS)


def window(*fees: int) -> list[dict[str, int]]:
    return [{"slot": 100 + i, "prioritizationFee": fee} for i, fee in enumerate(fees)]


def test_percentiles_are_nearest_rank_integers() -> None:
    values = list(range(1, 21))  # 1..20
    assert [percentile(values, p) for p in (0, 25, 50, 75, 90, 95, 100)] == [1, 5, 10, 15, 18, 19, 20]
    assert percentile([], 50) == 0


def test_the_global_window_uses_every_slot() -> None:
    sample = fee_sample([0] * 130 + list(range(1_000, 21_000, 1_000)), scoped=False)
    result = suggestion(sample, "critical")
    assert result == {
        "suggested_fee_microlamports": 5_000,  # rank 135 of 150
        "urgency": "critical",
        "all_levels": {
            "low": 0,
            "medium": 0,
            "high": 0,
            "veryHigh": 13_000,  # rank 143
            "sample_count": 150,
            "paid_slot_count": 20,
            "basis": "all_slots",
        },
        "scoped_to_accounts": False,
    }


def test_scoped_to_accounts_paid_slots_count_from_three() -> None:
    paid = fee_sample([0] * 10 + [300, 100, 200], scoped=True)
    assert (paid.fees, paid.basis, paid.paid_slot_count, paid.slot_count) == ([300, 100, 200], "paid_slots", 3, 13)
    assert suggestion(paid, "low")["all_levels"]["low"] == 100
    two = fee_sample([0] * 10 + [300, 100], scoped=True)
    assert (two.basis, two.paid_slot_count) == ("all_slots", 2)
    assert suggestion(two, "high")["suggested_fee_microlamports"] == 0  # the result may be zero


def test_estimate_levels() -> None:
    sample = fee_sample(list(range(1, 21)), scoped=False)
    assert estimate(sample, "High", False) == {"priorityFeeEstimate": 15}
    assert estimate(sample, "Medium", True) == {
        "priorityFeeEstimate": 10,
        "priorityFeeLevels": {"min": 1, "low": 5, "medium": 10, "high": 15, "veryHigh": 19, "unsafeMax": 20},
    }


@pytest.mark.parametrize(
    "answer", [None, {"value": []}, [{"slot": 1}], [{"prioritizationFee": 1.5}], [{"prioritizationFee": -1}]]
)
def test_a_broken_fee_window_is_no_window(answer: Any) -> None:
    assert slot_fees(answer) is None
    assert slot_fees(window(0, 5)) == [0, 5]


@pytest.mark.parametrize(
    ("params", "query"),
    [
        ([], FeeQuery("medium")),
        (["high"], FeeQuery("high")),
        ([{}], FeeQuery("medium")),
        ([{"urgency": "critical", "accounts": [KEY, KEY]}], FeeQuery("critical", (KEY,))),
        ([{"accounts": []}], FeeQuery("medium")),
    ],
)
def test_suggest_priority_fee_params(params: list[Any], query: FeeQuery) -> None:
    item = plan("suggestPriorityFee", params)
    assert item.error is None and item.price == 5
    assert item.parsed(FeeQuery) == query


@pytest.mark.parametrize(
    "params",
    [
        ["urgent"],
        [{"urgency": "max"}],
        [{"accounts": KEY}],
        [{"accounts": ["not-a-key"]}],
        [{"accounts": [str(Pubkey.new_unique()) for _ in range(129)]}],
        [{"account": [KEY]}],
        ["low", "high"],
        [5],
    ],
)
def test_bad_suggest_priority_fee_params_are_refused_free(params: list[Any]) -> None:
    item = plan("suggestPriorityFee", params)
    assert item.error is not None and item.error.code == -32602 and item.price == 0


def tx_bytes(*, signed: bool, v0: bool) -> tuple[bytes, list[str]]:
    """A transfer from a payer to a recipient, reading a third (readonly) account: and its writable keys."""
    payer, to = Keypair(), Pubkey.new_unique()
    ix = transfer(TransferParams(from_pubkey=payer.pubkey(), to_pubkey=to, lamports=1))
    blockhash = Hash.new_unique()
    if v0:
        message = MessageV0.try_compile(payer.pubkey(), [ix], [], blockhash)
        tx = VersionedTransaction(message, [payer]) if signed else VersionedTransaction.populate(message, [])
        return bytes(tx), [str(payer.pubkey()), str(to)]
    legacy = Message.new_with_blockhash([ix], payer.pubkey(), blockhash)
    raw = Transaction([payer], legacy, blockhash) if signed else Transaction.new_unsigned(legacy)
    return bytes(raw), [str(payer.pubkey()), str(to)]


@pytest.mark.parametrize("v0", [False, True], ids=["legacy", "v0"])
@pytest.mark.parametrize("signed", [False, True], ids=["unsigned", "signed"])
def test_writable_accounts_of_a_transaction(signed: bool, v0: bool) -> None:
    raw, writable = tx_bytes(signed=signed, v0=v0)
    assert writable_accounts(base58.b58encode(raw).decode(), "base58") == writable
    assert writable_accounts(base64.b64encode(raw).decode(), "base64") == writable
    assert isinstance(writable_accounts("not base64!", "base64"), str)
    assert isinstance(writable_accounts(base64.b64encode(b"\x01" * 80).decode(), "base64"), str)


def test_priority_fee_estimate_params() -> None:
    raw, writable = tx_bytes(signed=False, v0=True)
    cases: list[tuple[Any, FeeQuery]] = [
        ([], FeeQuery("Medium")),
        ([{"accountKeys": [KEY]}], FeeQuery("Medium", (KEY,))),
        ([{"accountKeys": [KEY], "options": {"priorityLevel": "VeryHigh"}}], FeeQuery("VeryHigh", (KEY,))),
        (
            [{"options": {"priorityLevel": "unsafeMax", "includeAllPriorityFeeLevels": True}}],
            FeeQuery("UnsafeMax", (), True),
        ),
        ([{"options": {"priorityLevel": "High", "recommended": True}}], FeeQuery("Medium")),
        ([{"options": {"priorityLevel": "Default", "lookbackSlots": 50}}], FeeQuery("Medium")),
        ([{"transaction": base58.b58encode(raw).decode()}], FeeQuery("Medium", tuple(writable))),
        (
            [{"transaction": base64.b64encode(raw).decode(), "options": {"transactionEncoding": "base64"}}],
            FeeQuery("Medium", tuple(writable)),
        ),
    ]
    for params, query in cases:
        item = plan("getPriorityFeeEstimate", params)
        assert item.error is None and item.price == 1, (params, item.error)
        assert item.parsed(FeeQuery) == query, params


@pytest.mark.parametrize(
    "params",
    [
        ["x"],
        [{"options": {"priorityLevel": "Urgent"}}],
        [{"options": {"includeAllPriorityFeeLevels": "yes"}}],
        [{"options": []}],
        [{"accountKeys": [str(Pubkey.new_unique()) for _ in range(129)]}],
        [{"accountKeys": [KEY], "transaction": "abc"}],
        [{"transaction": "0OIl"}],  # not base58
        [{"transaction": "AAAA", "options": {"transactionEncoding": "base64"}}],  # not a transaction
        [{"transaction": "AAAA", "options": {"transactionEncoding": "json"}}],
    ],
)
def test_bad_priority_fee_estimate_params_are_refused_free(params: list[Any]) -> None:
    item = plan("getPriorityFeeEstimate", params)
    assert item.error is not None and item.error.code == -32602 and item.price == 0
