"""What each webhook event carries: the ``data`` of its delivery (the job's ``payload``). Pure.

The sources write one delivery job per subscription an event reaches (:mod:`gateway.storage.webhook_events`):

==================  ======================================================================================
event               ``data``
==================  ======================================================================================
deposit.credited    ``{signature, amount_base_units, credits, bonus_credits, balance, slot}``: ``credits``
                    is what the deposit added, the referral bonus (``bonus_credits``) included;
                    ``balance`` the balance right after; ``slot`` the transfer's slot (null when unknown)
low_balance         ``{balance, threshold}``: the balance right after the deduction that crossed below
                    ``threshold`` (1,000 credits); once per crossing, again only after a deposit lifted
                    the balance back to the threshold or above
credits.expiring    ``{batch_id, remaining, expires_at}``: the credit batch (``/account/info``'s
                    ``credit_batches[].id``), its credits left, its expiry (ISO 8601 UTC); once per batch
api_key.rotated     ``{key_prefix, rotated_at, replaced_previous}``: the first 14 characters of the new key
                    (``srpc_live_`` and 4 more; never the key), when (ISO 8601 UTC), and whether an older
                    key was revoked (false for an account's first key)
transaction         ``{signature, slot, block_time, err, memo, watched, filter_type}``: a successful
                    transaction (``err`` always null) that mentions ``watched``, the subscription's
                    address (the account, the program id, or the owner's own key for ``my_account``)
signal.<kind>       the Signal event itself (the delivery body is the event, not an envelope)
==================  ======================================================================================

A transaction's fee, accounts and instructions are one ``getTransaction`` away: the watch reads the
node's signature list, which has none of them, and fetching every transaction of a busy program
would cost the node far more than the deliveries are worth.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final

from gateway.core.credits import LOW_BALANCE_CREDITS

#: Event types: the lifecycle names, ``transaction`` (account, program and my_account watches) and
#: ``signal.<kind>``.
TRANSACTION_EVENT: Final = "transaction"
SIGNAL_EVENT_PREFIX: Final = "signal."

LOW_BALANCE: Final = "low_balance"
DEPOSIT_CREDITED: Final = "deposit.credited"
CREDITS_EXPIRING: Final = "credits.expiring"
API_KEY_ROTATED: Final = "api_key.rotated"
#: The subscription kinds a transaction watch serves.
WATCH_FILTERS: Final = ("account", "program", "my_account")
#: How much of a key ``api_key.rotated`` shows: the ``srpc_live_`` prefix and 4 characters of 43.
KEY_PREFIX_CHARS: Final = 14
#: A transaction reaches the subscriptions created before its block time plus this: block times are
#: whole seconds of the slot's start, and the chain's clock and the database's differ a little. A
#: subscription may so receive a transaction made up to this long before it was created, never older.
BLOCK_TIME_SLACK_S: Final = 5


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


def transaction(entry: Any, watched: str) -> dict[str, Any] | None:
    """The ``data`` of a watch's delivery from one ``getSignaturesForAddress`` entry (``filter_type`` is
    added per subscription); None for a failed transaction or an entry that is not one."""
    if not isinstance(entry, dict) or not isinstance(entry.get("signature"), str) or entry.get("err") is not None:
        return None
    slot, block_time, memo = entry.get("slot"), entry.get("blockTime"), entry.get("memo")
    return {
        "signature": entry["signature"],
        "slot": slot if isinstance(slot, int) else None,
        "block_time": block_time if isinstance(block_time, int) else None,
        "err": None,
        "memo": memo if isinstance(memo, str) else None,
        "watched": watched,
    }


def signal_event_type(kind: str) -> str:
    """``signal.<kind>``, the event type of a signal delivery."""
    return SIGNAL_EVENT_PREFIX + kind
