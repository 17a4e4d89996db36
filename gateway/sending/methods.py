"""The send and bundle methods: their declarations and parameter parsers. Pure.

A send's transaction is decoded and its signatures verified here, before it is billed (refused free
otherwise); the handlers read what the parser returns (a :class:`WireTx`, a :class:`Bundle`).
``sendTransaction`` goes to the node as it is, once verified; the others are answered by the gateway
(the bundle methods only with a block engine: :mod:`gateway.sending.relay`).
"""

from __future__ import annotations

import re
from typing import Any

from solders.signature import Signature

from gateway.core.errors import RpcError, invalid_params
from gateway.core.fees import URGENCIES
from gateway.core.methods import MethodClass, MethodSpec
from gateway.core.params import config_object
from gateway.core.transactions import MAX_V1_BYTES, WireTx, decode_transaction
from gateway.sending.bundles import MAX_BUNDLE, Bundle, check_bundle

_BUNDLE_ID = re.compile(r"[0-9a-f]{64}")
_MAX_TX_CHARS = 4 * MAX_V1_BYTES // 3 + 4  # base64 of the largest transaction


def _transaction(params: list[Any], encoding: str | None) -> WireTx | RpcError:
    """The transaction of a send, decoded and verified."""
    decoded = decode_transaction(params[0] if params else None, encoding)
    if isinstance(decoded, str):
        return invalid_params(decoded)
    return decoded


def parse_send_transaction(params: list[Any]) -> WireTx | RpcError:
    config = config_object(params, 1)
    if isinstance(config, RpcError):
        return config
    return _transaction(params, config.get("encoding", "base58"))  # the node's default


def parse_smart_send(params: list[Any]) -> WireTx | RpcError:
    config = config_object(params, 1)
    if isinstance(config, RpcError):
        return config
    if not isinstance(config.get("simulate", False), bool):
        return invalid_params("simulate must be true or false")
    urgency = config.get("priority_fee_urgency")
    if urgency is not None and urgency not in URGENCIES:
        return invalid_params(f"priority_fee_urgency must be one of {', '.join(URGENCIES)}")
    return _transaction(params, None)  # base64 or base58, told apart by decoding


def parse_send_and_confirm(params: list[Any]) -> WireTx | RpcError:
    config = config_object(params, 1)
    if isinstance(config, RpcError):
        return config
    if not isinstance(config.get("skipPreflight", True), bool):
        return invalid_params("skipPreflight must be true or false")
    return _transaction(params, config.get("encoding", "base64"))


def parse_bundle(params: list[Any]) -> Bundle | RpcError:
    checked = check_bundle(params)
    if isinstance(checked, str):
        return invalid_params(checked)
    return Bundle(tuple(checked))


def check_simulate_bundle(params: list[Any]) -> RpcError | None:
    first = params[0] if params else None
    if not isinstance(first, dict) or not isinstance(first.get("transactions"), list):
        return invalid_params("simulateBundle params are [{transactions: [<base64 tx>, ...]}]")
    txs = first["transactions"]
    if not 1 <= len(txs) <= MAX_BUNDLE or not all(isinstance(tx, str) and 0 < len(tx) <= _MAX_TX_CHARS for tx in txs):
        return invalid_params(f"transactions must be 1 to {MAX_BUNDLE} base64 transactions")
    return None


def check_bundle_ids(params: list[Any]) -> RpcError | None:
    ids = params[0] if params else None
    if (
        not isinstance(ids, list)
        or not 1 <= len(ids) <= MAX_BUNDLE
        or not all(_BUNDLE_ID.fullmatch(str(i)) for i in ids)
    ):
        return invalid_params(f"params are [[<bundle id>, ... up to {MAX_BUNDLE}]] (64 hex digits each)")
    return None


def check_signature(params: list[Any]) -> RpcError | None:
    value = params[0] if params else None
    if not isinstance(value, str) or len(value) > 90:
        return invalid_params("params are [<transaction signature, base58>]")
    try:
        Signature.from_string(value)
    except ValueError:
        return invalid_params("params are [<transaction signature, base58>]")
    return None


SPECS: tuple[MethodSpec[Any], ...] = (
    MethodSpec("sendTransaction", MethodClass.SEND, parse_send_transaction),
    MethodSpec("sendSmartTransaction", MethodClass.SEND, parse_smart_send, local=True),
    MethodSpec("sendAndConfirm", MethodClass.SEND_AND_CONFIRM, parse_send_and_confirm, local=True),
    MethodSpec("getSendStatus", MethodClass.READ_CHEAP, check_signature, local=True),
    MethodSpec("sendBundle", MethodClass.SEND_BUNDLE, parse_bundle, local=True),
    MethodSpec("simulateBundle", MethodClass.READ_HEAVY, check_simulate_bundle, local=True),
    MethodSpec("getBundleStatuses", MethodClass.BUNDLE_STATUS, check_bundle_ids, local=True),
    MethodSpec("getInflightBundleStatuses", MethodClass.BUNDLE_STATUS, check_bundle_ids, local=True),
    MethodSpec("getTipAccounts", MethodClass.READ_CHEAP, local=True),
    MethodSpec("getTipFloor", MethodClass.READ_CHEAP, local=True),
)
