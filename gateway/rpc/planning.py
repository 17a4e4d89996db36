"""Per-method rules applied before admission: classify, price, check and normalise params.

Pure. Every rejection here is free: it happens before any rate unit or credit is taken.
"""

from __future__ import annotations

import re
from typing import Any

import base58
from solders.signature import Signature

from gateway.core.errors import (
    RpcCode,
    RpcError,
    invalid_params,
    method_denied,
    method_not_found,
    profile_disabled,
)
from gateway.core.fees import ESTIMATE_PERCENTILES, MAX_FEE_ACCOUNTS, FeeQuery
from gateway.core.jsonrpc import RpcItem
from gateway.core.methods import MethodClass, PriceTable, closest_methods, method_class
from gateway.core.transactions import MAX_V1_BYTES, decode_transaction, writable_accounts
from gateway.history.enrich import DEFAULT_HISTORY_LIMIT, MAX_HISTORY_LIMIT, HistoryQuery
from gateway.sending.bundles import MAX_BUNDLE, check_bundle
from gateway.trades.params import parse_sell, parse_snipe

#: Methods the gateway answers itself; one not registered by the app is refused, free, with -32601.
GATEWAY_METHODS = frozenset(
    {
        "suggestPriorityFee",
        "getPriorityFeeEstimate",
        "getTransactionHistory",
        "sendSmartTransaction",
        "sendAndConfirm",
        "sendBundle",
        "simulateBundle",
        "getBundleStatuses",
        "getInflightBundleStatuses",
        "getTipAccounts",
        "getTipFloor",
        "getSendStatus",
        "executeSnipe",
        "executeSell",
    }
)
URGENCIES = ("low", "medium", "high", "critical")
#: Methods that accept ``maxSupportedTransactionVersion`` (0 or 1, default 0).
TX_VERSION_METHODS = frozenset({"getBlock", "getTransaction", "getBlocksWithLimit", "simulateTransaction"})
#: Of those, the ones a node reads it for; the gateway injects the default 0 there.
TX_VERSION_FORWARDED = frozenset({"getBlock", "getTransaction"})
ASSET_OWNER_KEYS = ("ownerAddress", "owner_address", "owner")


def plan_item(item: RpcItem, prices: PriceTable, implemented: frozenset[str] = frozenset()) -> None:
    """Classify and price ``item`` in place, or set its error. ``implemented``: gateway methods built so far."""
    cls = method_class(item.method)
    error = _class_error(item.method, cls, implemented)
    price = prices.price(cls) if cls is not None else None
    if error is None and price is None:  # fail closed: a call without a price is refused, never forwarded free
        error = method_unavailable(item.method)
    if error is None:
        error = _normalise_params(item)
    if error is not None:
        item.error = error
        return
    assert cls is not None and price is not None
    item.method_class = cls
    item.price = price


def _class_error(method: str, cls: MethodClass | None, implemented: frozenset[str]) -> RpcError | None:
    if cls is None:
        return method_not_found(method, closest_methods(method))
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
    item_rule = _ITEM_RULES.get(item.method)
    if error is None and item_rule is not None:
        error = item_rule(item)
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
    if not 1 <= len(txs) <= MAX_BUNDLE or not all(isinstance(tx, str) and 0 < len(tx) <= _MAX_TX_CHARS for tx in txs):
        return invalid_params(f"transactions must be 1 to {MAX_BUNDLE} base64 transactions")
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


def _config(params: list[Any], at: int) -> dict[str, Any] | RpcError:
    value = params[at] if len(params) > at else None
    if value is None:
        return {}
    if not isinstance(value, dict):
        return invalid_params(f"parameter {at} must be a configuration object")
    return value


def _transaction(item: RpcItem, encoding: str | None) -> RpcError | None:
    """Decode and verify the transaction of a send before it is billed (refused free otherwise)."""
    decoded = decode_transaction(item.params[0] if item.params else None, encoding)
    if isinstance(decoded, str):
        return invalid_params(decoded)
    item.decoded = decoded
    return None


def _send_transaction(item: RpcItem) -> RpcError | None:
    config = _config(item.params, 1)
    if isinstance(config, RpcError):
        return config
    return _transaction(item, config.get("encoding", "base58"))  # the node's default


def _send_smart_transaction(item: RpcItem) -> RpcError | None:
    config = _config(item.params, 1)
    if isinstance(config, RpcError):
        return config
    if not isinstance(config.get("simulate", False), bool):
        return invalid_params("simulate must be true or false")
    urgency = config.get("priority_fee_urgency")
    if urgency is not None and urgency not in URGENCIES:
        return invalid_params(f"priority_fee_urgency must be one of {', '.join(URGENCIES)}")
    return _transaction(item, None)  # base64 or base58, told apart by decoding


def _send_and_confirm(item: RpcItem) -> RpcError | None:
    config = _config(item.params, 1)
    if isinstance(config, RpcError):
        return config
    if not isinstance(config.get("skipPreflight", True), bool):
        return invalid_params("skipPreflight must be true or false")
    return _transaction(item, config.get("encoding", "base64"))


def _send_bundle(item: RpcItem) -> RpcError | None:
    checked = check_bundle(item.params)
    if isinstance(checked, str):
        return invalid_params(checked)
    item.decoded = checked
    return None


def _fee_accounts(value: Any, name: str) -> tuple[str, ...] | RpcError:
    """Up to 128 base58 public keys (duplicates dropped, order kept); absent or empty: none."""
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > MAX_FEE_ACCOUNTS or not all(_is_pubkey(a) for a in value):
        return invalid_params(f"{name} must be an array of at most {MAX_FEE_ACCOUNTS} base58 public keys")
    return tuple(dict.fromkeys(value))


def _suggest_priority_fee(item: RpcItem) -> RpcError | None:
    params: list[Any] = item.params
    usage = "params are [<urgency>] or [{urgency?: low|medium|high|critical, accounts?: [<pubkey>, ...]}]"
    first = params[0] if params else None
    if len(params) > 1 or not isinstance(first, str | dict | None):
        return invalid_params(usage)
    options: dict[str, Any] = {"urgency": first} if isinstance(first, str) else first or {}
    unknown = set(options) - {"urgency", "accounts"}
    if unknown:
        return invalid_params(f"unknown field {sorted(unknown)[0]!r}: {usage}")
    urgency = "medium" if options.get("urgency") is None else options["urgency"]
    if urgency not in URGENCIES:
        return invalid_params(f"urgency must be one of {', '.join(URGENCIES)}")
    accounts = _fee_accounts(options.get("accounts"), "accounts")
    if isinstance(accounts, RpcError):
        return accounts
    item.decoded = FeeQuery(urgency, accounts)
    return None


def _priority_fee_estimate(item: RpcItem) -> RpcError | None:
    params: list[Any] = item.params
    first = params[0] if params else {}
    if len(params) > 1 or not isinstance(first, dict):
        return invalid_params("params are [{accountKeys?: [<pubkey>, ...], transaction?: <tx>, options?: {...}}]")
    options = {} if first.get("options") is None else first["options"]
    if not isinstance(options, dict):
        return invalid_params("options must be an object")
    level = _estimate_level(options.get("priorityLevel"))
    if level is None:
        return invalid_params(f"priorityLevel must be one of {', '.join(ESTIMATE_PERCENTILES)}")
    flags = {
        key: options.get(key) is not None and options[key] for key in ("includeAllPriorityFeeLevels", "recommended")
    }
    bad = next((key for key, value in flags.items() if not isinstance(value, bool)), None)
    if bad is not None:
        return invalid_params(f"{bad} must be true or false")
    if flags["recommended"]:
        level = "Medium"
    keys, tx = first.get("accountKeys"), first.get("transaction")
    if keys is not None and tx is not None:
        return invalid_params("give accountKeys or transaction, not both")
    accounts = _fee_accounts(keys, "accountKeys") if tx is None else _transaction_accounts(tx, options)
    if isinstance(accounts, RpcError):
        return accounts
    item.decoded = FeeQuery(level, accounts, flags["includeAllPriorityFeeLevels"])
    return None


def _estimate_level(value: Any) -> str | None:
    """The priority level named (any case; absent or ``Default``: Medium), or None."""
    if value is None:
        return "Medium"
    if not isinstance(value, str):
        return None
    if value.lower() == "default":
        return "Medium"
    return next((level for level in ESTIMATE_PERCENTILES if level.lower() == value.lower()), None)


def _transaction_accounts(tx: Any, options: dict[str, Any]) -> tuple[str, ...] | RpcError:
    encoding = options.get("transactionEncoding") or "base58"
    if not isinstance(encoding, str) or encoding.lower() not in ("base58", "base64"):
        return invalid_params("transactionEncoding must be base58 or base64")
    accounts = writable_accounts(tx, encoding.lower())
    if isinstance(accounts, str):
        return invalid_params(accounts)
    return _fee_accounts(accounts, "the transaction's writable accounts")


def _transaction_history(item: RpcItem) -> RpcError | None:
    """``[<address>, {limit?: 1..100 (default 10)}]``; anything else is refused free."""
    params: list[Any] = item.params
    usage = f"params are [<address, base58>, {{limit?: 1 to {MAX_HISTORY_LIMIT}}}]"
    if not 1 <= len(params) <= 2 or not _is_pubkey(params[0]):
        return invalid_params(usage)
    options = params[1] if len(params) > 1 and params[1] is not None else {}
    if not isinstance(options, dict):
        return invalid_params(usage)
    unknown = set(options) - {"limit"}
    if unknown:
        return invalid_params(f"unknown field {sorted(unknown)[0]!r}: {usage}")
    limit = DEFAULT_HISTORY_LIMIT if options.get("limit") is None else options["limit"]
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_HISTORY_LIMIT:
        return invalid_params(f"limit must be an integer from 1 to {MAX_HISTORY_LIMIT}")
    item.decoded = HistoryQuery(params[0], limit)
    return None


def _bundle_ids(item: RpcItem) -> RpcError | None:
    ids = item.params[0] if item.params else None
    if (
        not isinstance(ids, list)
        or not 1 <= len(ids) <= MAX_BUNDLE
        or not all(_BUNDLE_ID.fullmatch(str(i)) for i in ids)
    ):
        return invalid_params(f"params are [[<bundle id>, ... up to {MAX_BUNDLE}]] (64 hex digits each)")
    return None


def _signature(item: RpcItem) -> RpcError | None:
    value = item.params[0] if item.params else None
    if not isinstance(value, str) or len(value) > 90:
        return invalid_params("params are [<transaction signature, base58>]")
    try:
        Signature.from_string(value)
    except ValueError:
        return invalid_params("params are [<transaction signature, base58>]")
    return None


def _trade(item: RpcItem) -> RpcError | None:
    """``executeSnipe`` / ``executeSell``: the params decoded (:mod:`gateway.trades.params`)."""
    parsed = parse_snipe(item.params) if item.method == "executeSnipe" else parse_sell(item.params)
    if isinstance(parsed, RpcError):
        return parsed
    item.decoded = parsed
    return None


_BUNDLE_ID = re.compile(r"[0-9a-f]{64}")
_MAX_TX_CHARS = 4 * MAX_V1_BYTES // 3 + 4  # base64 of the largest transaction
_PARAM_RULES = {
    "getTokenAccountsByOwner": _token_accounts_by_owner,
    "getAssetsByOwner": _assets_by_owner,
    "simulateBundle": _simulate_bundle,
}
#: Rules that need the item itself (they keep what they decoded on it).
_ITEM_RULES = {
    "sendTransaction": _send_transaction,
    "sendSmartTransaction": _send_smart_transaction,
    "sendAndConfirm": _send_and_confirm,
    "sendBundle": _send_bundle,
    "getBundleStatuses": _bundle_ids,
    "getInflightBundleStatuses": _bundle_ids,
    "getSendStatus": _signature,
    "suggestPriorityFee": _suggest_priority_fee,
    "getPriorityFeeEstimate": _priority_fee_estimate,
    "getTransactionHistory": _transaction_history,
    "executeSnipe": _trade,
    "executeSell": _trade,
}
