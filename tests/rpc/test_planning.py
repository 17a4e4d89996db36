"""Per-method rules before admission: classes, prices, denials and parameter normalisation."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.core.errors import invalid_request_item
from gateway.core.jsonrpc import RpcItem
from gateway.core.methods import REPLAYABLE_CLASSES, MethodClass, PriceTable
from gateway.node.http import is_read
from gateway.rpc.planning import plan_item, plan_items, too_deep
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
    bads: list[Any] = [
        [["AQID"]],
        [],
        [{"transactions": []}],
        [{"transactions": [1]}],
        [{"transactions": ["AQID"] * 6}],
    ]
    for bad in bads:
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


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=3),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=2), children, max_size=3),
    max_leaves=20,
)


def depth(value: Any) -> int:
    """How many levels of arrays and objects ``value`` nests (a scalar: 0)."""
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    return 0


@given(
    value=st.lists(JSON, max_size=4) | st.dictionaries(st.text(max_size=2), JSON, max_size=3), limit=st.integers(1, 6)
)
def test_too_deep_agrees_with_the_depth_of_the_value(value: Any, limit: int) -> None:
    """The one-pass check of the common shapes answers as the depth does, at every limit."""
    assert too_deep(value, limit) == (depth(value) > limit)


METHODS = [
    *("getSlot", "getBalance", "getTransaction", "getBlock", "sendTransaction", "getTokenAccountsByOwner"),
    *("getAssetsByOwner", "simulateBundle", "getSendStatus", "sendAndConfirm", "requestAirdrop", "getSlott"),
    "getEnrichedTransaction",
]
DEEP = [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]  # 34 levels: over the limit
PARAMS = (
    st.sampled_from(
        [None, [], [OWNER], [OWNER, {"encoding": "base64"}], [5, {"maxSupportedTransactionVersion": 1}], {"a": 1}, DEEP]
    )
    | JSON
)


@given(
    calls=st.lists(st.tuples(st.sampled_from(METHODS), PARAMS, st.booleans()), min_size=1, max_size=30),
    unpriced=st.booleans(),
)
def test_planning_a_batch_at_once_agrees_with_planning_each_item(
    calls: list[tuple[str, Any, bool]], unpriced: bool
) -> None:
    """plan_items (a method looked up once per batch) leaves every item as plan_item on its own does:
    the same class, price, params, parsed value or error; an item answered already is left alone."""
    prices = PriceTable(
        {c: p for c, p in PRICES.class_credits.items() if not (unpriced and c is MethodClass.READ_HEAVY)}
    )
    methods = registry("simulateBundle", "getSendStatus")

    def items() -> list[RpcItem]:
        made = [RpcItem(n, n, m, copy.deepcopy(p)) for n, (m, p, _) in enumerate(calls)]
        for item, (_, _, invalid) in zip(made, calls, strict=True):
            item.error = invalid_request_item("id is required") if invalid else None
        return made

    each, batch = items(), items()
    for item in each:
        if item.error is None:
            plan_item(item, methods, prices)
    plan_items(batch, methods, prices)
    assert batch == each


def test_the_two_rules_of_what_may_reach_the_node_twice_agree() -> None:
    """Forwarded calls are replayed by class (gateway/core/methods.py), the gateway's own calls to the
    node by name (gateway/node/http.py): every method of a replayable class is a read by name, and no
    method of another class is (docs/reliability.md)."""
    specs = [s for s in registry() if not s.local]  # what the gateway sends the node by name
    assert {s.name for s in specs if s.cls in REPLAYABLE_CLASSES and not is_read(s.name)} == set()
    others = {s.name for s in specs if s.cls not in REPLAYABLE_CLASSES and s.cls is not MethodClass.DENIED}
    assert "sendTransaction" in others
    assert {name for name in others if is_read(name)} == set()
