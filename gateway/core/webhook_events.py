"""The lifecycle webhook events' names and what each carries (the ``data`` of its delivery). Pure.

Only these: they are caused below the webhooks feature, by credits (``deposit.credited``), the ledger
(``low_balance``, ``credits.expiring``) and auth (``api_key.rotated``), each in the transaction of its
cause (:mod:`gateway.storage.webhook_events`), and those packages sit under webhooks in the layers
(``pyproject.toml``'s ``layers`` contract): they may not import it. Every other part of the events, their
one list, the transaction and signal events, and the table of each event's ``data``, is the feature's own:
:mod:`gateway.webhooks.events`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final

from gateway.core.credits import LOW_BALANCE_CREDITS

LOW_BALANCE: Final = "low_balance"
DEPOSIT_CREDITED: Final = "deposit.credited"
CREDITS_EXPIRING: Final = "credits.expiring"
API_KEY_ROTATED: Final = "api_key.rotated"
#: How much of a key ``api_key.rotated`` shows: the ``srpc_live_`` prefix and 4 characters of 43.
KEY_PREFIX_CHARS: Final = 14


def iso8601(moment: datetime) -> str:
    """The form ``/account/info`` uses: UTC, milliseconds, ``Z``."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def deposit_credited(
    signature: str, amount_base_units: int, credits: int, bonus_credits: int, balance: int, slot: int | None
) -> dict[str, Any]:
    return {
        "signature": signature,
        "amount_base_units": amount_base_units,
        "credits": credits,
        "bonus_credits": bonus_credits,
        "balance": balance,
        "slot": slot,
    }


def crosses_low_balance(charged: int, balance_after: int, notified: bool) -> bool:
    """Whether a deduction of ``charged`` credits crossed below the low-balance line for the first time
    since the account was last above it (``notified`` is the account's flag before the deduction)."""
    return charged > 0 and balance_after < LOW_BALANCE_CREDITS and not notified


def low_balance(balance: int) -> dict[str, Any]:
    return {"balance": balance, "threshold": LOW_BALANCE_CREDITS}


def credits_expiring(batch_id: int, remaining: int, expires_at: datetime) -> dict[str, Any]:
    return {"batch_id": batch_id, "remaining": remaining, "expires_at": iso8601(expires_at)}


def key_prefix(key: str) -> str:
    """What ``api_key.rotated`` shows of ``key``."""
    return key[:KEY_PREFIX_CHARS]


def api_key_rotated(prefix: str, rotated_at: datetime, replaced_previous: bool) -> dict[str, Any]:
    return {
        "key_prefix": prefix,
        "rotated_at": iso8601(rotated_at),
        "replaced_previous": replaced_previous,
    }
