"""Per-method rules before admission: classes, prices, denials and parameter normalisation."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.core.jsonrpc import RpcItem
from gateway.core.methods import MethodClass, PriceTable
from tests.credits.helpers import signed_tx
from tests.methods import planned, registry

OWNER = "11111111111111111111111111111111"
PRICES = PriceTable.default()


def plan(method: str, params: Any = None) -> RpcItem:
    return planned(method, params)


@pytest.mark.parametrize(
    ("method", "cls", "price"),
    [
        ("getSlot", MethodClass.READ_CHEAP, 1),
        ("getRecentPrioritizationFees", MethodClass.READ_CHEAP, 1),
        ("getTransaction", MethodClass.READ_MEDIUM, 5),
        ("getBlock", MethodClass.READ_HEAVY, 25),
        ("sendTransaction", MethodClass.SEND, 2),
    ],
)
def test_classes_and_prices(method: str, cls: MethodClass, price: int) -> None:
    item = plan(method, [signed_tx()] if method == "sendTransaction" else [])
    assert (item.error, item.method_class, item.price) == (None, cls, price)


@pytest.mark.parametrize(
    "method",
    [
        "requestAirdrop",
        "getProgramAccounts",
        "getSupply",
        "getStakeActivation",
        "getTokenLargestAccounts",
        "getTokenAccountsByDelegate",
        "getInflationReward",
        "noSuchMethod",
    ],
)
def test_denied_and_unknown_methods_are_32601(method: str) -> None:
    item = plan(method)
    assert item.error is not None and item.error.code == -32601
    assert item.price == 0


def test_archive_methods_are_disabled_by_profile() -> None:
    item = plan("getEnrichedTransaction")
    assert item.error is not None and item.error.code == -32004
    assert "service profile" in item.error.message


def test_gateway_methods_not_built_yet_are_refused_free() -> None:
    item = plan("sendAndConfirm", ["tx"])
    assert item.error is not None and item.error.code == -32601 and "not available" in item.error.message


def test_token_accounts_by_owner_gets_base64_injected() -> None:
    assert plan("getTokenAccountsByOwner", [OWNER, {"mint": OWNER}]).params[2] == {"encoding": "base64"}
    parsed = plan("getTokenAccountsByOwner", [OWNER, {"mint": OWNER}, {"encoding": "jsonParsed"}])
    assert parsed.params[2] == {"encoding": "jsonParsed"}
    bad = plan("getTokenAccountsByOwner", ["nope", {"mint": OWNER}])
    assert bad.error is not None and bad.error.code == -32602


@pytest.mark.parametrize(
    "first",
    [OWNER, {"ownerAddress": OWNER}, {"owner_address": OWNER}, {"owner": OWNER}],
)
def test_assets_by_owner_accepts_every_owner_form(first: Any) -> None:
    assert plan("getAssetsByOwner", [first]).params == [{"ownerAddress": OWNER}]


def test_assets_by_owner_keeps_paging_and_rejects_garbage() -> None:
    assert plan("getAssetsByOwner", [{"owner": OWNER, "page": 2}]).params == [{"ownerAddress": OWNER, "page": 2}]
    for bad in ([], [{"wallet": OWNER}], ["not-a-key"]):
        item = plan("getAssetsByOwner", bad)
        assert item.error is not None and item.error.code == -32602


def test_simulate_bundle_needs_the_object_form() -> None:
    def simulate(params: Any) -> RpcItem:
        return planned("simulateBundle", params, "simulateBundle")  # the gateway answers it (with a block engine)

    assert simulate([{"transactions": ["AQID"]}]).error is None
    for bad in ([["AQID"]], [], [{"transactions": []}], [{"transactions": [1]}], [{"transactions": ["AQID"] * 6}]):
        item = simulate(bad)
        assert item.error is not None and item.error.code == -32602


def test_max_supported_transaction_version() -> None:
    assert plan("getTransaction", ["sig"]).params == ["sig", {"maxSupportedTransactionVersion": 0}]
    assert plan("getBlock", [5, {"maxSupportedTransactionVersion": 1}]).params[1]["maxSupportedTransactionVersion"] == 1
    assert plan("simulateTransaction", ["tx", {"maxSupportedTransactionVersion": 1}]).params == ["tx", {}]
    for bad in (2, -1, "0", True):
        item = plan("getBlock", [5, {"maxSupportedTransactionVersion": bad}])
        assert item.error is not None and item.error.code == -32602


def test_params_must_be_an_array() -> None:
    item = plan("getSlot", {"commitment": "finalized"})
    assert item.error is not None and item.error.code == -32602


def test_price_overrides() -> None:
    prices = PriceTable.default().with_overrides({"READ_CHEAP": 3})
    assert prices.price(MethodClass.READ_CHEAP) == 3
    assert registry().class_of("getBalance") is MethodClass.READ_CHEAP


def test_a_class_without_a_price_is_refused_not_forwarded_free() -> None:
    """Fail closed: a table that does not sell SEND makes sendTransaction a free refusal, never price 0."""
    without_send = PriceTable({cls: credits for cls, credits in PRICES.class_credits.items() if cls != "SEND"})
    item = planned("sendTransaction", ["tx"], prices=without_send)
    assert item.error is not None and item.error.code == -32601
    assert not item.pending and item.price == 0 and item.method_class is None
    for method in ("sendAndConfirm", "getConfirmedTransaction", "requestAirdrop"):  # classes with no price
        assert plan(method).error is not None


@pytest.mark.parametrize("credits", [0, -1, True, 1.5])
def test_prices_are_positive_integers(credits: Any) -> None:
    with pytest.raises(ValueError, match="positive integer"):
        PriceTable.default().with_overrides({"READ_CHEAP": credits})


@pytest.mark.parametrize(
    ("method", "suggested"),
    [
        ("getSlott", ["getSlot"]),
        ("getbalance", ["getBalance"]),
        ("getRecentBlockhash", ["getLatestBlockhash"]),
        ("getProgramAccount", []),  # denied methods are never suggested
        ("fooBar", []),
        ("x" * 200, []),
    ],
)
def test_an_unknown_method_names_the_closest_known_ones_and_pricing(method: str, suggested: list[str]) -> None:
    item = plan(method, [])
    assert item.error is not None and item.error.code == -32601
    assert item.error.data == {"did_you_mean": suggested, "pricing": "/pricing"}
    assert item.error.message.startswith(f"Method not found: {method}.")
    assert item.error.message.endswith(" The methods and their prices: GET /pricing")
    for name in suggested:
        assert f"Did you mean {name}" in item.error.message
    assert "Did you mean" in item.error.message if suggested else "Did you mean" not in item.error.message
    assert item.method_class is None and item.price == 0  # refused free


def test_several_suggestions_read_as_a_list() -> None:
    item = plan("sendTransacton", [])
    assert item.error is not None
    assert "Did you mean sendTransaction, sendSmartTransaction or getTransaction?" in item.error.message
