"""Checks shared by the parameter parsers of the methods (each feature's ``methods.py``) and the routes. Pure.

Client text becomes a number only through :func:`whole_number`, which bounds its length first: Python's
``int()`` refuses more than 4,300 digits with a ``ValueError`` (a 500 where a refusal was due), and
converting costs time growing with the square of the length below that (docs/reliability.md, bad input).
"""

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


def whole_number(text: str, maximum: int) -> int | None:
    """The number ``text`` spells in ASCII decimal digits, or None: not only digits, or above ``maximum``.
    Leading zeros are allowed; what is longer than ``maximum`` is refused before it is converted."""
    if not (text.isascii() and text.isdigit()):
        return None
    digits = text.lstrip("0") or "0"
    if len(digits) > len(str(maximum)):
        return None
    value = int(digits)
    return value if value <= maximum else None


#: The largest unsigned 64-bit number: the bound of a token amount or a block height the node reports.
U64_MAX = (1 << 64) - 1


def node_integer(value: Any, maximum: int = U64_MAX) -> int | None:
    """A whole number the node sent as a JSON number, or None: a bool, a float, a string, negative or
    above ``maximum`` (``int()`` would take ``True``, ``1.9`` and ``'\u0661'``)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= maximum:
        return None
    return value


def node_amount(value: Any, maximum: int = U64_MAX) -> int | None:
    """A whole number the node sent as a string of ASCII digits (a token amount: a JSON number cannot hold
    every u64), or None: not a string, other characters (``str.isdigit`` takes '\u0661'), above ``maximum``."""
    return whole_number(value, maximum) if isinstance(value, str) else None


def config_object(params: list[Any], at: int) -> dict[str, Any] | RpcError:
    """The configuration object at ``params[at]`` (absent or null: empty), or why it is refused."""
    value = params[at] if len(params) > at else None
    if value is None:
        return {}
    if not isinstance(value, dict):
        return invalid_params(f"parameter {at} must be a configuration object")
    return value
