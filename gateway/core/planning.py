"""Per-method rules applied before admission: classify, price, check and normalise params.

Pure. Every rejection here is free: it happens before any rate unit or credit is taken.
"""

from __future__ import annotations

from typing import Any

import base58

from gateway.core.errors import (
    RpcCode,
    RpcError,
    invalid_params,
    method_denied,
    method_not_found,
    profile_disabled,
)
from gateway.core.jsonrpc import RpcItem
from gateway.core.methods import MethodClass, PriceTable, method_class

#: Methods the gateway answers itself (later issues); until built they are refused, free, with -32601.
GATEWAY_METHODS = frozenset(
    {"suggestPriorityFee", "getTransactionHistory", "sendSmartTransaction", "sendAndConfirm", "sendBundle"}
)
#: Methods that accept ``maxSupportedTransactionVersion`` (0 or 1, default 0).
TX_VERSION_METHODS = frozenset({"getBlock", "getTransaction", "getBlocksWithLimit", "simulateTransaction"})
#: Of those, the ones a node reads it for; the gateway injects the default 0 there.
TX_VERSION_FORWARDED = frozenset({"getBlock", "getTransaction"})
ASSET_OWNER_KEYS = ("ownerAddress", "owner_address", "owner")


def plan_item(item: RpcItem, prices: PriceTable, implemented: frozenset[str] = frozenset()) -> None:
    """Classify and price ``item`` in place, or set its error. ``implemented``: gateway methods built so far."""
    cls = method_class(item.method)
    error = _class_error(item.method, cls, implemented)
    if error is None:
        error = _normalise_params(item)
    if error is not None:
        item.error = error
        return
    assert cls is not None
    price = prices.price(cls)
    if price is None:  # fail closed: a call without a price is refused, never forwarded free
        item.error = method_unavailable(item.method)
        return
    item.method_class = cls
    item.price = price


def _class_error(method: str, cls: MethodClass | None, implemented: frozenset[str]) -> RpcError | None:
    if cls is None:
        return method_not_found(method)
    if cls is MethodClass.DENIED:
        return method_denied(method)
    if cls is MethodClass.ARCHIVE_HISTORY:
        return profile_disabled(method, "archive_history")
    if method in GATEWAY_METHODS and method not in implemented:
        return method_unavailable(method)
    return None


def method_unavailable(method: str) -> RpcError:
    return RpcError(RpcCode.METHOD_NOT_FOUND, f"Method not found: {method} is not available on this gateway yet")


def _normalise_params(item: RpcItem) -> RpcError | None:
    if item.params is None:
        item.params = []
    if not isinstance(item.params, list):
        return invalid_params("params must be an array")
    rule = _PARAM_RULES.get(item.method)
    error = rule(item.params) if rule is not None else None
    if error is None and item.method in TX_VERSION_METHODS:
        error = _tx_version(item)
    return error


def _is_pubkey(value: Any) -> bool:
    if not isinstance(value, str) or not 32 <= len(value) <= 44:
        return False
    try:
        return len(base58.b58decode(value)) == 32
    except ValueError:
        return False


def _token_accounts_by_owner(params: list[Any]) -> RpcError | None:
    if len(params) < 2 or not _is_pubkey(params[0]) or not isinstance(params[1], dict):
        return invalid_params("expected [owner pubkey, {mint | programId}, config?]")
    if len(params) == 2:
        params.append({"encoding": "base64"})
    elif not isinstance(params[2], dict):
        return invalid_params("config must be an object")
    else:
        params[2].setdefault("encoding", "base64")
    return None


def _assets_by_owner(params: list[Any]) -> RpcError | None:
    if not params:
        return invalid_params("owner is required")
    first = params[0]
    owner: Any = first
    rest: dict[str, Any] = {}
    if isinstance(first, dict):
        key = next((k for k in ASSET_OWNER_KEYS if k in first), None)
        if key is None:
            return invalid_params("owner object needs ownerAddress, owner_address or owner")
        owner = first[key]
        rest = {k: v for k, v in first.items() if k not in ASSET_OWNER_KEYS}
    if not _is_pubkey(owner):
        return invalid_params("owner must be a base58 public key")
    params[:] = [{"ownerAddress": owner, **rest}]
    return None


def _simulate_bundle(params: list[Any]) -> RpcError | None:
    first = params[0] if params else None
    if not isinstance(first, dict) or not isinstance(first.get("transactions"), list):
        return invalid_params("simulateBundle params are [{transactions: [<base64 tx>, ...]}]")
    txs = first["transactions"]
    if not txs or not all(isinstance(tx, str) and tx for tx in txs):
        return invalid_params("transactions must be a non-empty array of encoded transactions")
    return None


def _tx_version(item: RpcItem) -> RpcError | None:
    params: list[Any] = item.params
    config_at = 2 if item.method == "getBlocksWithLimit" else 1
    config = params[config_at] if len(params) > config_at else None
    if config is not None and not isinstance(config, dict):
        return None  # legacy string forms (e.g. an encoding) are the node's to judge
    version = config.get("maxSupportedTransactionVersion") if config else None
    if version is not None and (isinstance(version, bool) or version not in (0, 1)):
        return invalid_params("maxSupportedTransactionVersion must be 0 or 1")
    if item.method in TX_VERSION_FORWARDED:
        if config is not None:
            config.setdefault("maxSupportedTransactionVersion", 0)
        elif len(params) == config_at:  # a missing positional argument is the node's to report
            params.append({"maxSupportedTransactionVersion": 0})
    elif config is not None:
        config.pop("maxSupportedTransactionVersion", None)  # validated; the node does not read it here
    return None


_PARAM_RULES = {
    "getTokenAccountsByOwner": _token_accounts_by_owner,
    "getAssetsByOwner": _assets_by_owner,
    "simulateBundle": _simulate_bundle,
}
