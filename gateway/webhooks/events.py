"""Webhook events: the one list of their names and what each carries, the ``data`` of its delivery (the
job's ``payload``). Pure.

The lifecycle events are caused below this feature (a deposit credited, a deduction crossing the
low-balance line, a batch marked as expiring, a key rotated: credits, the ledger, auth), in the
transaction of their cause, which writes their jobs (:mod:`gateway.storage.webhook_events`). Those
packages sit under webhooks in the layers and may not import it, so their names and payload builders
stay in the kernel (:mod:`gateway.core.webhook_events`) and are listed here, not named again. The
transaction watches' and the signals' events are written by this feature's sources
(:mod:`gateway.webhooks.store.sources`) and are defined here.

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

from typing import Any, Final

from gateway.core.webhook_events import API_KEY_ROTATED, CREDITS_EXPIRING, DEPOSIT_CREDITED, LOW_BALANCE

#: The lifecycle events a ``lifecycle`` subscription may list (``lifecycle_events``): what validation
#: accepts, what the OpenAPI document enumerates and what ``GET /pricing`` serves to the page
#: (``webhooks.lifecycle_events``), which offers them from there.
LIFECYCLE_EVENTS: Final = (LOW_BALANCE, DEPOSIT_CREDITED, CREDITS_EXPIRING, API_KEY_ROTATED)
#: The event of the transaction watches (account, program and my_account subscriptions).
TRANSACTION_EVENT: Final = "transaction"
#: A signal delivery's event is ``signal.<kind>``.
SIGNAL_EVENT_PREFIX: Final = "signal."
#: The subscription kinds a transaction watch serves.
WATCH_FILTERS: Final = ("account", "program", "my_account")
#: A transaction reaches the subscriptions created before its block time plus this: block times are
#: whole seconds of the slot's start, and the chain's clock and the database's differ a little. A
#: subscription may so receive a transaction made up to this long before it was created, never older.
BLOCK_TIME_SLACK_S: Final = 5


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
