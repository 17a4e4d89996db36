"""Parameter helpers for the method handlers: positional arguments, config objects, and the
base-58 keys, signatures and unsigned integers in them, with mainnet's `Invalid params` messages."""

from __future__ import annotations

from typing import Any

from solders.pubkey import Pubkey
from solders.signature import Signature

from devnode.encoding import check_tx_encoding
from devnode.errors import invalid_params


def arg(params: list[Any], i: int, default: Any = None) -> Any:
    return params[i] if len(params) > i else default


def required(params: list[Any], i: int, what: str) -> Any:
    if len(params) <= i:
        raise invalid_params(f"Invalid params: missing field `{what}`")
    return params[i]


def config(params: list[Any], i: int) -> dict[str, Any]:
    cfg = arg(params, i)
    if cfg is None:
        return {}
    if not isinstance(cfg, dict):
        raise invalid_params("Invalid params: expected a config object")
    return cfg


def sub_config(cfg: dict[str, Any], name: str) -> dict[str, Any]:
    """The object ``cfg[name]`` (absent or null: empty); anything else is -32602, as the real node answers."""
    value = cfg.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise invalid_params(f"Invalid params: `{name}` must be an object")
    return value


def data_slice(cfg: dict[str, Any]) -> dict[str, Any] | None:
    """``dataSlice`` as ``{offset, length}`` unsigned integers, or None when absent."""
    if cfg.get("dataSlice") is None:
        return None
    value = sub_config(cfg, "dataSlice")
    return {"offset": as_uint(value.get("offset", 0), "offset"), "length": as_uint(value.get("length", 0), "length")}


def as_pubkey(value: Any) -> Pubkey:
    if not isinstance(value, str):
        raise invalid_params("Invalid params: expected a base-58 encoded public key string")
    try:
        return Pubkey.from_string(value)
    except ValueError as exc:
        raise invalid_params(f"Invalid param: {exc}") from exc


def as_signature(value: Any) -> Signature:
    if not isinstance(value, str):
        raise invalid_params("Invalid params: expected a base-58 encoded signature string")
    try:
        return Signature.from_string(value)
    except ValueError as exc:
        raise invalid_params("Invalid param: Invalid") from exc


def as_uint(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise invalid_params(f"Invalid params: `{what}` must be an unsigned integer")
    return value


def max_version_of(cfg: dict[str, Any]) -> int | None:
    value = cfg.get("maxSupportedTransactionVersion")
    if value is None:
        return None
    return as_uint(value, "maxSupportedTransactionVersion")


def tx_config(params: list[Any], i: int, default_encoding: str) -> tuple[str, dict[str, Any]]:
    raw = arg(params, i)
    cfg = {"encoding": raw} if isinstance(raw, str) else config(params, i)
    encoding = cfg.get("encoding") or default_encoding
    check_tx_encoding(encoding)
    return encoding, cfg
