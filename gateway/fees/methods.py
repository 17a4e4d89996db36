"""``suggestPriorityFee`` and ``getPriorityFeeEstimate``: their declarations and parameter parsers. Pure.

What a parser refuses is refused free, before admission; what it returns (a :class:`FeeQuery`) is what
the handler (:mod:`gateway.fees.method`) reads.
"""

from __future__ import annotations

from typing import Any

from gateway.core.errors import RpcError, invalid_params
from gateway.core.fees import ESTIMATE_PERCENTILES, MAX_FEE_ACCOUNTS, URGENCIES, FeeQuery
from gateway.core.methods import MethodClass, MethodSpec
from gateway.core.params import is_pubkey
from gateway.core.transactions import writable_accounts


def _fee_accounts(value: Any, name: str) -> tuple[str, ...] | RpcError:
    """Up to 128 base58 public keys (duplicates dropped, order kept); absent or empty: none."""
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > MAX_FEE_ACCOUNTS or not all(is_pubkey(a) for a in value):
        return invalid_params(f"{name} must be an array of at most {MAX_FEE_ACCOUNTS} base58 public keys")
    return tuple(dict.fromkeys(value))


def parse_suggestion(params: list[Any]) -> FeeQuery | RpcError:
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
    return FeeQuery(urgency, accounts)


def parse_estimate(params: list[Any]) -> FeeQuery | RpcError:
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
    return FeeQuery(level, accounts, flags["includeAllPriorityFeeLevels"])


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


SPECS: tuple[MethodSpec[Any], ...] = (
    MethodSpec("suggestPriorityFee", MethodClass.READ_MEDIUM, parse_suggestion, local=True),
    MethodSpec("getPriorityFeeEstimate", MethodClass.READ_CHEAP, parse_estimate, local=True),
)
