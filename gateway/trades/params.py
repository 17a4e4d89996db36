"""The params of the trade builders, ``executeSnipe`` and ``executeSell``, checked before billing. Pure.

Shapes (docs/api.md's, with the choices made here for what it leaves open)::

    executeSnipe [{mint, amount_sol, slippage_bps?, priority_fee_micro_lamports?, exact_in?}]
    executeSell  [{mint, token_amount, slippage_bps?, priority_fee_micro_lamports?}]

- ``mint``: a base58 public key (32 bytes).
- ``amount_sol``: the SOL budget, a JSON number or a decimal string (at most 40 characters), positive,
  at most 9 decimals (one lamport) and at most :data:`MAX_AMOUNT_SOL`. It becomes lamports exactly: a
  number is read through its shortest decimal form (``repr``: 0.1 is ``"0.1"``, not
  0.1000000000000000055...), never multiplied as a float, so ``0.1`` SOL is exactly 100,000,000 lamports.
- ``token_amount``: raw base units (pump tokens have 6 decimals: 1 token = 1,000,000 units), a JSON
  integer or a string of decimal digits, positive, at most u64. ``'all'``, fractions, zero and negatives
  are refused, each with its own message; a string's length is bounded before it is converted
  (:func:`gateway.core.params.whole_number`).
- ``slippage_bps``: an integer from 0 to 10,000 (default 500, i.e. 5%).
- ``exact_in`` (snipe only): ``true`` spends exactly ``amount_sol`` (the program's budget buy,
  ``buy_exact_sol_in`` / ``buy_exact_quote_in_v2``) with ``slippage_bps`` taken off the tokens instead of
  added to the cost; default ``false``. A JSON boolean.
- ``priority_fee_micro_lamports``: the compute-unit price, an integer from 0 to
  :data:`MAX_PRIORITY_FEE_MICRO_LAMPORTS` (default 100,000).

Any other field is refused (a misspelt ``slippage`` must not silently mean the default). Every refusal
is a ``-32602`` naming the cause, and free: planning refuses before any rate unit or credit is taken.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Context, Decimal, InvalidOperation
from typing import Any, Final

from solders.pubkey import Pubkey

from gateway.core.errors import RpcError, invalid_params
from gateway.core.params import whole_number

__all__ = [
    "DEFAULT_PRIORITY_FEE_MICRO_LAMPORTS",
    "DEFAULT_SLIPPAGE_BPS",
    "LAMPORTS_PER_SOL",
    "MAX_AMOUNT_SOL",
    "MAX_PRIORITY_FEE_MICRO_LAMPORTS",
    "MAX_SLIPPAGE_BPS",
    "SellParams",
    "SnipeParams",
    "parse_sell",
    "parse_snipe",
]

LAMPORTS_PER_SOL: Final = 1_000_000_000
DEFAULT_SLIPPAGE_BPS: Final = 500
MAX_SLIPPAGE_BPS: Final = 10_000
DEFAULT_PRIORITY_FEE_MICRO_LAMPORTS: Final = 100_000
#: 100 lamports per compute unit: at the snipe's 150,000-unit limit a priority fee of 0.015 SOL. A cap
#: against unit mix-ups (lamports typed as micro-lamports), far above what landing a trade takes.
MAX_PRIORITY_FEE_MICRO_LAMPORTS: Final = 100_000_000
#: Far beyond what any bonding curve takes (a whole curve costs about 85 SOL); keeps lamports in u64.
MAX_AMOUNT_SOL: Final = 1_000_000
_U64_MAX: Final = 2**64 - 1
_SOL_DECIMALS: Final = 9
#: "1000000.000000000" is 17 characters; room for zeros around it, and every digit read exactly.
_MAX_AMOUNT_TEXT: Final = 40
_EXACT: Final = Context(prec=_MAX_AMOUNT_TEXT + 10)
_DIGITS = re.compile(r"[0-9]+")
_DECIMAL = re.compile(r"[0-9]+(\.[0-9]+)?|\.[0-9]+")
_COMMON = ("slippage_bps", "priority_fee_micro_lamports")
_SNIPE_USAGE = "params are [{mint, amount_sol, slippage_bps?, priority_fee_micro_lamports?, exact_in?}]"
_SELL_USAGE = "params are [{mint, token_amount, slippage_bps?, priority_fee_micro_lamports?}]"


@dataclass(frozen=True, slots=True)
class SnipeParams:
    mint: Pubkey
    amount_lamports: int
    slippage_bps: int
    priority_fee_micro_lamports: int
    exact_in: bool = False


@dataclass(frozen=True, slots=True)
class SellParams:
    mint: Pubkey
    token_amount: int
    slippage_bps: int
    priority_fee_micro_lamports: int


def parse_snipe(params: Any) -> SnipeParams | RpcError:
    """``executeSnipe``'s params, or the ``-32602`` refusing them."""
    fields = _fields(params, ("mint", "amount_sol"), _SNIPE_USAGE, ("exact_in",))
    if isinstance(fields, RpcError):
        return fields
    exact_in = fields.get("exact_in", False)
    if not isinstance(exact_in, bool):
        return invalid_params(f"exact_in must be true or false, got {_shown(exact_in)}")
    mint, common = _mint(fields["mint"]), _common(fields)
    if isinstance(mint, RpcError):
        return mint
    lamports = sol_to_lamports(fields["amount_sol"])
    if isinstance(lamports, str):
        return invalid_params(lamports)
    if isinstance(common, RpcError):
        return common
    return SnipeParams(mint, lamports, *common, exact_in=exact_in)


def parse_sell(params: Any) -> SellParams | RpcError:
    """``executeSell``'s params, or the ``-32602`` refusing them."""
    fields = _fields(params, ("mint", "token_amount"), _SELL_USAGE)
    if isinstance(fields, RpcError):
        return fields
    mint, common = _mint(fields["mint"]), _common(fields)
    if isinstance(mint, RpcError):
        return mint
    amount = token_units(fields["token_amount"])
    if isinstance(amount, str):
        return invalid_params(amount)
    if isinstance(common, RpcError):
        return common
    return SellParams(mint, amount, *common)


def _fields(
    params: Any, required: tuple[str, str], usage: str, optional: tuple[str, ...] = ()
) -> dict[str, Any] | RpcError:
    if not isinstance(params, list) or len(params) != 1 or not isinstance(params[0], dict):
        return invalid_params(usage)
    fields: dict[str, Any] = params[0]
    unknown = sorted(set(fields) - {*required, *_COMMON, *optional})
    if unknown:
        return invalid_params(f"unknown field {unknown[0]!r}: {usage}")
    missing = next((name for name in required if fields.get(name) is None), None)
    if missing is not None:
        return invalid_params(f"{missing} is required: {usage}")
    return fields


def _mint(value: Any) -> Pubkey | RpcError:
    if isinstance(value, str) and 32 <= len(value) <= 44:
        try:
            return Pubkey.from_string(value)
        except ValueError:
            pass
    return invalid_params(f"mint must be a base58 public key (32 bytes), got {_shown(value)}")


def _common(fields: dict[str, Any]) -> tuple[int, int] | RpcError:
    slippage = _integer(fields.get("slippage_bps"), "slippage_bps", DEFAULT_SLIPPAGE_BPS, MAX_SLIPPAGE_BPS)
    if isinstance(slippage, RpcError):
        return slippage
    fee = _integer(
        fields.get("priority_fee_micro_lamports"),
        "priority_fee_micro_lamports",
        DEFAULT_PRIORITY_FEE_MICRO_LAMPORTS,
        MAX_PRIORITY_FEE_MICRO_LAMPORTS,
    )
    if isinstance(fee, RpcError):
        return fee
    return slippage, fee


def _integer(value: Any, name: str, default: int, maximum: int) -> int | RpcError:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= maximum:
        return invalid_params(f"{name} must be an integer from 0 to {maximum:,}, got {_shown(value)}")
    return value


def sol_to_lamports(value: Any) -> int | str:
    """``amount_sol`` (a JSON number or a decimal string) in lamports, exactly; or why it is refused."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return f"amount_sol must be a number of SOL (e.g. 0.5), got {_shown(value)}"
    if isinstance(value, int) and not 0 < value <= MAX_AMOUNT_SOL:  # compared as is: no text of a huge one
        return f"amount_sol must be positive and at most {MAX_AMOUNT_SOL:,} SOL, got {_shown(value)}"
    text = repr(value) if isinstance(value, float) else str(value).strip()
    if isinstance(value, str) and len(text) > _MAX_AMOUNT_TEXT:
        return f"amount_sol must be at most {_MAX_AMOUNT_TEXT} characters, got {_shown(value)}"
    if isinstance(value, str) and not _DECIMAL.fullmatch(text.lstrip("-")):
        return f'amount_sol must be a number of SOL in decimal digits (e.g. "0.5"), got {_shown(value)}'
    try:
        amount = Decimal(text)
    except InvalidOperation:
        return f"amount_sol must be a finite number of SOL, got {_shown(value)}"
    if not amount.is_finite():
        return f"amount_sol must be a finite number of SOL, got {_shown(value)}"
    if amount <= 0:
        return f"amount_sol must be positive, got {_shown(value)}"
    exponent = amount.normalize(_EXACT).as_tuple().exponent  # the default context would round past 28 digits
    if isinstance(exponent, int) and exponent < -_SOL_DECIMALS:
        return f"amount_sol has more than {_SOL_DECIMALS} decimals (1 lamport = 0.000000001 SOL), got {_shown(value)}"
    if amount > MAX_AMOUNT_SOL:
        return f"amount_sol must be at most {MAX_AMOUNT_SOL:,} SOL, got {_shown(value)}"
    return int(amount * LAMPORTS_PER_SOL)


def token_units(value: Any) -> int | str:
    """``token_amount`` (raw base units: an integer or a string of digits); or why it is refused."""
    if isinstance(value, str) and value.strip().lower() == "all":
        return (
            "token_amount 'all' is not accepted: give the number of raw base units to sell "
            "(read the balance with getTokenAccountBalance and pass its amount)"
        )
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return f"token_amount must be an integer or a decimal string of raw base units, got {_shown(value)}"
    if isinstance(value, float) and value.is_integer():
        return f"token_amount must be an integer, not a float ({value!r}): send it as an integer or a string"
    if isinstance(value, int):  # compared as is: text of a huge one could not even be made (4,300 digits)
        return _units_refusal(value) or value
    text = repr(value) if isinstance(value, float) else value.strip()
    negative = text.startswith("-")
    digits = text[1:] if negative else text
    if _DECIMAL.fullmatch(digits) and not _DIGITS.fullmatch(digits):
        return (
            f"token_amount {_shown(value)} is a fraction: it is raw base units, a whole number "
            "(1 token of 6 decimals is 1000000 units)"
        )
    if not _DIGITS.fullmatch(digits):
        return f"token_amount must be an integer or a decimal string of raw base units, got {_shown(value)}"
    if negative and digits.strip("0"):
        return f"token_amount must be positive, got a negative amount ({_shown(value)})"
    amount = whole_number(digits, _U64_MAX)
    if amount is None:
        return f"token_amount {_shown(value)} is larger than a u64 ({_U64_MAX})"
    return _units_refusal(amount) or amount


def _units_refusal(amount: int) -> str | None:
    if amount < 0:
        return f"token_amount must be positive, got a negative amount ({_shown(amount)})"
    if amount == 0:
        return "token_amount must be positive, got 0: there is nothing to sell"
    if amount > _U64_MAX:
        return f"token_amount {_shown(amount)} is larger than a u64 ({_U64_MAX})"
    return None


def _shown(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        return f"an integer of {value.bit_length()} bits"  # repr() of one past 4,300 digits raises
    if isinstance(value, str) and len(value) > 60:
        return repr(value[:57]) + "..."  # repr() of the whole would copy it
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
