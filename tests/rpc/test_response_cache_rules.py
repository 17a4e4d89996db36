"""The response cache's rules, without a node: what is final, keys, the statuses merge, the LRU's bounds."""

from __future__ import annotations

from typing import Any

import orjson

from gateway.core.jsonrpc import RpcItem
from gateway.rpc.cache_rules import (
    FINAL_TTL_S,
    MAX_ENTRY_BYTES,
    MAX_KEY_BYTES,
    ResponseLru,
    ask_node_for_missing,
    cache_key,
    entries_to_keep,
    lookup_of,
    merge_statuses,
)
from tests.methods import planned

FINAL = {"confirmationStatus": "finalized", "confirmations": None, "err": None, "slot": 5, "status": {"Ok": None}}
CONFIRMED = {**FINAL, "confirmationStatus": "confirmed", "confirmations": 1}


def answered(method: str, params: list[Any], result: Any) -> RpcItem:
    item = RpcItem(index=0, id=1, method=method, params=params)
    item.response = {"jsonrpc": "2.0", "result": result, "id": 1}
    return item


def kept(item: RpcItem, finalized_slot: int | None = 100, ttl_s: float = 0.0) -> list[tuple[float, bool]]:
    lookup = lookup_of(item)
    assert lookup is not None
    lookup.found = [None] * len(lookup.keys)
    signatures = item.params[0] if item.method == "getSignatureStatuses" else None
    return [(e.ttl_s, e.final) for e in entries_to_keep(lookup, finalized_slot, ttl_s, signatures)]


def test_keys_are_canonical() -> None:
    assert cache_key("getBlock", [1, {"b": 1, "a": 2}]) == cache_key("getBlock", [1, {"a": 2, "b": 1}])
    assert cache_key("getBlock", [1]) != cache_key("getTransaction", [1])
    assert lookup_of(RpcItem(index=0, id=1, method="getSlot", params=[])) is None


def test_what_is_final() -> None:
    tx = {"slot": 5}
    assert kept(answered("getTransaction", ["s", {"maxSupportedTransactionVersion": 0}], tx)) == [(FINAL_TTL_S, True)]
    assert kept(answered("getTransaction", ["s", {"commitment": "finalized"}], tx)) == [(FINAL_TTL_S, True)]
    assert kept(answered("getTransaction", ["s", {"commitment": "confirmed"}], tx)) == []
    assert kept(answered("getTransaction", ["s", {"commitment": "confirmed"}], tx), ttl_s=0.5) == [(0.5, False)]
    assert kept(answered("getTransaction", ["s"], None), ttl_s=0.5) == []  # not found: never kept
    assert kept(answered("getBlock", [5, "json"], {"blockhash": "h"})) == [(FINAL_TTL_S, True)]
    assert kept(answered("getBlockTime", [100], 1_700_000_000)) == [(FINAL_TTL_S, True)]
    assert kept(answered("getBlockTime", [101], 1_700_000_000)) == []  # above the newest finalized slot
    assert kept(answered("getBlockTime", [5], 1_700_000_000), finalized_slot=None) == []
    assert kept(answered("getGenesisHash", [], "hash")) == [(FINAL_TTL_S, True)]
    error = RpcItem(index=0, id=1, method="getGenesisHash", params=[])
    error.response = {"jsonrpc": "2.0", "error": {"code": -32005, "message": "unhealthy"}, "id": 1}
    assert kept(error) == []
    big = answered("getBlock", [5], {"data": "x" * MAX_ENTRY_BYTES})
    assert kept(big) == []


def test_statuses_are_kept_per_signature_and_merged() -> None:
    value = {"context": {"slot": 9}, "value": [FINAL, CONFIRMED, None]}
    item = answered("getSignatureStatuses", [["a", "b", "c"]], value)
    assert kept(item) == [(FINAL_TTL_S, True)]
    assert kept(item, ttl_s=0.2) == [(FINAL_TTL_S, True), (0.2, False)]  # null: never

    asking = RpcItem(index=0, id=1, method="getSignatureStatuses", params=[["a", "x", "b"]])
    lookup = lookup_of(asking)
    assert lookup is not None
    lookup.found = [orjson.dumps(FINAL), None, orjson.dumps(FINAL)]
    ask_node_for_missing(lookup)
    assert asking.params == [["x"]]
    asking.response = {"jsonrpc": "2.0", "result": {"context": {"slot": 10}, "value": [CONFIRMED]}, "id": 1}
    merge_statuses(lookup, ["a", "x", "b"])
    assert asking.params == [["a", "x", "b"]]
    assert orjson.loads(orjson.dumps(asking.response))["result"]["value"] == [FINAL, CONFIRMED, FINAL]


def test_the_lru_is_bounded_in_entries_bytes_and_time() -> None:
    now = [0.0]
    lru = ResponseLru(max_entries=2, max_bytes=10, clock=lambda: now[0])
    lru.put(b"a", b"1234", 10)
    lru.put(b"b", b"1234", 10)
    assert lru.get(b"a") == b"1234"  # a is now the most recent
    lru.put(b"c", b"12", 10)
    assert lru.get(b"b") is None and len(lru) == 2  # b went first
    lru.put(b"d", b"12345678", 10)  # over the byte bound (keys count): the oldest go until it fits
    assert lru.get(b"a") is None and lru.get(b"d") == b"12345678" and lru.bytes == 9
    now[0] = 11
    assert lru.get(b"d") is None and lru.bytes == 0
    lru.put(b"k" * 9, b"1", 10)  # a large key with a small value is counted whole
    assert lru.bytes == 10
    lru.put(b"k" * 10, b"1", 10)
    assert len(lru) == 0 and lru.bytes == 0


def test_large_keys_are_neither_looked_up_nor_kept() -> None:
    padded = RpcItem(index=0, id=1, method="getBlockTime", params=[5, "x" * MAX_KEY_BYTES])
    assert lookup_of(padded) is None
    long_signature = RpcItem(index=0, id=1, method="getSignatureStatuses", params=[["s" * 89]])
    assert lookup_of(long_signature) is None
    assert lookup_of(RpcItem(index=0, id=1, method="getSignatureStatuses", params=[["s" * 88]])) is not None


def test_the_cached_reads_refuse_what_they_do_not_read() -> None:
    """Planning bounds their params to what the method reads (docs/api.md, Response cache): free -32602."""
    sig = "5" * 88
    refused: list[tuple[str, list[Any]]] = [
        ("getTransaction", [sig, {"encoding": "json", "padding": "x" * 1000}]),
        ("getTransaction", [sig, {"commitment": "f" * 1000}]),
        ("getTransaction", [sig, {"encoding": {"nested": 1}}]),
        ("getTransaction", [sig, "json" * 100]),
        ("getTransaction", [sig, {}, {}]),
        ("getBlock", [5, {"minContextSlot": 1}]),
        ("getBlockTime", [5, 6]),
        ("getGenesisHash", [{}]),
        ("getEpochSchedule", ["x"]),
        ("getSignatureStatuses", [[sig], {"searchTransactionHistory": True, "x": 1}]),
    ]
    for method, params in refused:
        item = planned(method, params)
        assert item.error is not None and item.error.code == -32602, (method, params)
        assert len(item.error.message) < 200 and item.price == 0
    accepted: list[tuple[str, list[Any]]] = [
        ("getTransaction", [sig, {"encoding": "jsonParsed", "commitment": "confirmed"}]),
        ("getTransaction", [sig, "base64"]),
        ("getBlock", [5, {"transactionDetails": "signatures", "rewards": False, "maxSupportedTransactionVersion": 0}]),
        ("getBlockTime", [5]),
        ("getGenesisHash", []),
        ("getSignatureStatuses", [[sig], {"searchTransactionHistory": True}]),
    ]
    for method, params in accepted:
        assert planned(method, params).error is None, (method, params)
