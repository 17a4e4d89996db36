"""Checks shared by the methods' parameter parsers (each feature's ``methods.py``). Pure."""

from __future__ import annotations

from typing import Any

import base58

from gateway.core.errors import RpcError, invalid_params


def is_pubkey(value: Any) -> bool:
    """A base58 string of 32 bytes."""
    if not isinstance(value, str) or not 32 <= len(value) <= 44:
        return False
    try:
        return len(base58.b58decode(value)) == 32
    except ValueError:
        return False


def config_object(params: list[Any], at: int) -> dict[str, Any] | RpcError:
    """The configuration object at ``params[at]`` (absent or null: empty), or why it is refused."""
    value = params[at] if len(params) > at else None
    if value is None:
        return {}
    if not isinstance(value, dict):
        return invalid_params(f"parameter {at} must be a configuration object")
    return value
