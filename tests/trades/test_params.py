"""The builders' params (gateway.trades.params) and how planning applies them: exact lamports, the
spec's defaults, and a -32602 naming the cause for everything else."""

from __future__ import annotations

from typing import Any

import pytest
from solders.pubkey import Pubkey

from gateway.core.errors import RpcError
from gateway.core.methods import MethodClass
from gateway.trades.params import SellParams, SnipeParams, parse_sell, parse_snipe, sol_to_lamports, token_units
from tests.methods import planned

MINT = str(Pubkey.new_unique())


@pytest.mark.parametrize(
    ("amount", "lamports"),
    [
        (0.1, 100_000_000),
        (0.3, 300_000_000),  # 0.1 + 0.2 territory: read as "0.3", never as the float's binary value
        (1, 1_000_000_000),
        (1.000000001, 1_000_000_001),
        ("0.000000001", 1),
        ("2.5", 2_500_000_000),
        ("1.500000000000", 1_500_000_000),  # trailing zeros are not decimals
        (123456.789, 123_456_789_000_000),
        (1_000_000, 1_000_000 * 10**9),
    ],
)
def test_amount_sol_becomes_lamports_exactly(amount: Any, lamports: int) -> None:
    assert sol_to_lamports(amount) == lamports


@pytest.mark.parametrize(
    ("amount", "cause"),
    [
        (0, "positive"),
        (-0.5, "positive"),
        ("-1", "positive"),
        (0.0000000001, "more than 9 decimals"),
        ("0.0000000015", "more than 9 decimals"),
        (1_000_000.5, "at most 1,000,000 SOL"),
        (True, "number of SOL"),
        ([1], "number of SOL"),
        ("1e3", "decimal digits"),
        ("abc", "decimal digits"),
    ],
)
def test_amount_sol_refusals_name_the_cause(amount: Any, cause: str) -> None:
    refused = sol_to_lamports(amount)
    assert isinstance(refused, str) and cause in refused, refused


@pytest.mark.parametrize(
    ("amount", "units"),
    [(1, 1), ("1000000", 1_000_000), (2**64 - 1, 2**64 - 1), (" 42 ", 42), ("007", 7)],
)
def test_token_amount_is_raw_units(amount: Any, units: int) -> None:
    assert token_units(amount) == units


@pytest.mark.parametrize(
    ("amount", "cause"),
    [
        ("all", "'all' is not accepted"),
        ("ALL", "'all' is not accepted"),
        ("1.5", "is a fraction"),
        (1.5, "is a fraction"),
        ("0.000001", "is a fraction"),
        (0, "got 0"),
        ("0", "got 0"),
        (-5, "negative"),
        ("-5", "negative"),
        (1000.0, "not a float"),
        (2**64, "larger than a u64"),
        ("12abc", "decimal string"),
        (None, "decimal string"),
        (True, "decimal string"),
    ],
)
def test_token_amount_refusals_are_distinct(amount: Any, cause: str) -> None:
    refused = token_units(amount)
    assert isinstance(refused, str) and cause in refused, refused


def test_defaults_and_explicit_values() -> None:
    assert parse_snipe([{"mint": MINT, "amount_sol": 0.5}]) == SnipeParams(
        Pubkey.from_string(MINT), 500_000_000, 500, 100_000
    )
    assert parse_sell([{"mint": MINT, "token_amount": "10", "slippage_bps": 0, "priority_fee_micro_lamports": 0}]) == (
        SellParams(Pubkey.from_string(MINT), 10, 0, 0)
    )


@pytest.mark.parametrize(
    ("params", "cause"),
    [
        ([], "params are [{mint, amount_sol"),
        ([{"mint": MINT, "amount_sol": 1}, {}], "params are [{mint, amount_sol"),
        ({"mint": MINT, "amount_sol": 1}, "params are [{mint, amount_sol"),
        ([{"amount_sol": 1}], "mint is required"),
        ([{"mint": MINT}], "amount_sol is required"),
        ([{"mint": "not-a-key", "amount_sol": 1}], "mint must be a base58 public key"),
        ([{"mint": "1" * 44, "amount_sol": 1}], "mint must be a base58 public key"),
        ([{"mint": MINT, "amount_sol": 1, "slippage": 100}], "unknown field 'slippage'"),
        ([{"mint": MINT, "amount_sol": 1, "slippage_bps": 10_001}], "slippage_bps must be an integer from 0 to 10,000"),
        ([{"mint": MINT, "amount_sol": 1, "slippage_bps": 5.5}], "slippage_bps must be an integer"),
        ([{"mint": MINT, "amount_sol": 1, "slippage_bps": -1}], "slippage_bps must be an integer"),
        ([{"mint": MINT, "amount_sol": 1, "priority_fee_micro_lamports": -1}], "priority_fee_micro_lamports"),
        ([{"mint": MINT, "amount_sol": 1, "priority_fee_micro_lamports": 10**9}], "from 0 to 100,000,000"),
    ],
)
def test_snipe_shape_refusals(params: Any, cause: str) -> None:
    refused = parse_snipe(params)
    assert isinstance(refused, RpcError) and refused.code == -32602 and cause in refused.message, refused


@pytest.mark.parametrize("method", ["executeSnipe", "executeSell"])
def test_planning_classes_prices_and_decodes_them(method: str) -> None:
    field = {"amount_sol": "0.25"} if method == "executeSnipe" else {"token_amount": 5}
    item = planned(method, [{"mint": MINT, **field}], method)
    assert item.error is None and item.method_class is MethodClass.TRADE_BUILD and item.price == 50
    item.parsed(SnipeParams if method == "executeSnipe" else SellParams)  # a TypeError if planning parsed another

    refused = planned(method, [{"mint": MINT, **field, "extra": 1}], method)
    assert refused.error is not None and refused.error.code == -32602 and "extra" in refused.error.message

    unbuilt = planned(method, [{"mint": MINT, **field}])
    assert unbuilt.error is not None and unbuilt.error.code == -32601 and "not available" in unbuilt.error.message
